"""Receipts: what a third party checks, offline, about a record the service returned — pure.

A receipt names the version it is for (memory, record, version, the digest of the content the
reader was shown), the changeset that made that version (its id, which is the SHA-256 of its
canonical bytes, the bytes themselves, and every signature kept for them), the op inside it,
the writer, and, for a memory whose writes are reviewed, how the version was admitted: the
proposal, its originator, the reviewer, the merger and the merge authorization (the
single-use nonce of the ``memory-git-merge/v2`` envelope). The server signs the whole receipt
(``RECEIPT_DOMAIN`` + its canonical JSON without ``receipt_signature``), so no field of it can
change unseen; the changeset's own signatures were made when it was accepted, so the history
behind the receipt holds even against a server that later wished it said something else.

:func:`check` is the verifier `pal verify receipt` runs: it needs the receipt (or the record
that carries it) and the server's published keys, nothing else. Every refusal names the part
that failed.
"""

from __future__ import annotations

import base64
import binascii
import copy
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from palimpsest import canonical
from palimpsest.errors import InvalidInput
from palimpsest.identity import Identity, b64_nopad
from palimpsest.service.model import Signature, Wire
from palimpsest.service.provenance import signing

FORMAT: Final = "palimpsest-receipt/v1"
RECEIPT_DOMAIN: Final = b"palimpsest-receipt/v1\n"
_CONTENT_FIELDS: Final = ("type", "title", "content", "attributes")


def content_digest(record: Mapping[str, Any]) -> str:
    """SHA-256 of what a reader was shown of a record: type, title, content, attributes and
    its validity interval, in canonical JSON."""
    when = record.get("time") or {}
    doc = {k: record.get(k) for k in _CONTENT_FIELDS}
    doc["valid_from"] = when.get("valid_from") if isinstance(when, Mapping) else None
    doc["valid_to"] = when.get("valid_to") if isinstance(when, Mapping) else None
    return hashlib.sha256(canonical.encode(doc)).hexdigest()


@dataclass(frozen=True, slots=True)
class Made:
    """What made one version, as the service read it from its history."""

    changeset_id: str
    ref_name: str
    canonical: bytes
    op: int
    body_digest: str
    signatures: tuple[Signature, ...]
    review: Wire | None


def build(record: Mapping[str, Any], made: Made, issued_at: str, key: Identity) -> Wire:
    """The signed receipt for a rendered record."""
    doc: Wire = {
        "object": "memory.receipt", "format": FORMAT,
        "memory_id": record["memory_id"], "record_id": record["id"],
        "version": record["version"], "content_digest": content_digest(record),
        "writer": copy.deepcopy(record["written_by"]), "body_digest": made.body_digest,
        "changeset": {"id": made.changeset_id, "digest": f"sha256:{made.changeset_id}",
                      "ref_name": made.ref_name,
                      "canonical": base64.b64encode(made.canonical).decode("ascii")},
        "op": made.op,
        "signatures": [s.to_wire() for s in made.signatures],
        "review": made.review, "issued_at": issued_at,
    }
    sig = key.sign(RECEIPT_DOMAIN + canonical.encode(doc))
    doc["receipt_signature"] = {"key_id": key.actor, "public_key": key.public_key_text,
                                "algorithm": signing.ALGORITHM, "signature": b64_nopad(sig)}
    return doc


class Refused(InvalidInput):
    """A receipt (or an export) that does not verify; ``part`` names what failed."""

    def __init__(self, part: str, reason: str,
                 hint: str = "do not trust what it says; ask its server again") -> None:
        super().__init__(f"{part}: {reason}", code="not-verified", hint=hint)
        self.part = part
        self.reason = reason


def _names(op: Mapping[str, Any], record_id: str) -> bool:
    payload = op.get("payload") if isinstance(op.get("payload"), Mapping) else {}
    return record_id in (op.get("target_event_id"), op.get("resulting_event_id"),
                         (payload or {}).get("record_id"))


def _writer(value: Any) -> Any:
    """A writer without what the record adds around it (on whose behalf, which run)."""
    if not isinstance(value, Mapping):
        return value
    return {k: v for k, v in value.items() if k not in ("on_behalf_of", "consolidation_id")}


def check(doc: Any, keys: Mapping[str, str]) -> Wire:
    """Verify a receipt — or a record carrying one under ``provenance`` — against published
    keys (``key_id -> public key``, :func:`signing.trusted_keys`). Returns what was checked.

    Raises:
        Refused: the first part that failed, by name.
    """
    record = None
    if isinstance(doc, Mapping) and isinstance(doc.get("provenance"), Mapping):
        record, doc = doc, doc["provenance"]  # a record as the service (or a tool) returned it
    if not isinstance(doc, Mapping) or doc.get("format") != FORMAT:
        raise Refused("receipt", f"not a {FORMAT} document")
    receipt = dict(doc)
    rsig = receipt.pop("receipt_signature", None)
    if not isinstance(rsig, Mapping) or not isinstance(rsig.get("public_key"), str) \
            or not isinstance(rsig.get("signature"), str):
        raise Refused("receipt signature", "missing")
    key_id = str(rsig.get("key_id"))
    if keys.get(key_id) != rsig["public_key"]:
        raise Refused("receipt signature", f"key {key_id[:16]} is not one of the "
                      "server's published keys")
    reason = signing.problem(rsig["public_key"], rsig["signature"],
                             RECEIPT_DOMAIN + canonical.encode(receipt))
    if reason is not None:
        raise Refused("receipt signature", f"{reason} (a field of the receipt was changed)")
    cs = receipt.get("changeset")
    try:
        data = base64.b64decode(str(cs["canonical"]), validate=True)  # type: ignore[index]
        content = canonical.decode(data)
    except (KeyError, TypeError, ValueError, binascii.Error, InvalidInput) as exc:
        raise Refused("changeset bytes", "not canonical JSON in base64") from exc
    cid = hashlib.sha256(data).hexdigest()
    if cid != cs.get("id") or cs.get("digest") != f"sha256:{cid}":  # type: ignore[union-attr]
        raise Refused("changeset bytes", "their SHA-256 is not the changeset id")
    if not isinstance(content, dict) or content.get("project_id") != receipt.get("memory_id"):
        raise Refused("changeset bytes", "they are not a changeset of the receipt's memory")
    server_ok = 0
    for raw in receipt.get("signatures") or ():
        try:
            sig = signing.signature_of(raw)
        except InvalidInput as exc:
            raise Refused("changeset signature", exc.message) from exc
        if sig.role == "server" and sig.key_id not in keys:
            raise Refused("changeset signature", f"key {sig.key_id[:16]} is not one of the "
                          "server's published keys")
        why = signing.problem(sig.public_key, sig.signature, data)
        if why is not None:
            raise Refused("changeset signature", f"{sig.signer}: {why}")
        server_ok += sig.role == "server"
    if not server_ok:
        raise Refused("changeset signature", "no signature by the server")
    ops = content.get("ops")
    index = receipt.get("op")
    if not isinstance(ops, list) or not isinstance(index, int) or not 0 <= index < len(ops) \
            or not _names(ops[index], str(receipt.get("record_id"))):
        raise Refused("changeset op", f"the changeset makes no version of record "
                      f"{receipt.get('record_id')}")
    op = ops[index]
    payload = op.get("payload") if isinstance(op.get("payload"), Mapping) else None
    if payload is not None:  # a UHP op: the writer and body digest are under the signature
        if _writer(payload.get("written_by")) != _writer(receipt.get("writer")):
            raise Refused("writer", "the receipt's writer is not the changeset's")
        if payload.get("body_digest") not in (None, receipt.get("body_digest")):
            raise Refused("body digest", "the receipt's body digest is not the changeset's")
    elif content.get("author_principal") != _principal(receipt.get("writer")):
        raise Refused("writer", "the receipt's writer is not the changeset's author")
    if record is not None:
        if (record.get("id"), record.get("memory_id"), record.get("version")) != (
                receipt.get("record_id"), receipt.get("memory_id"), receipt.get("version")):
            raise Refused("record", "the receipt is for another record or version")
        if content_digest(record) != receipt.get("content_digest"):
            raise Refused("record content", "it does not match the receipt's content digest")
        if _writer(record.get("written_by")) != _writer(receipt.get("writer")):
            raise Refused("writer", "the record's writer is not the receipt's")
    return {"object": "memory.receipt.verified", "ok": True, "record_id": receipt["record_id"],
            "version": receipt["version"], "changeset_id": cid,
            "signatures": [s.get("signer") for s in receipt.get("signatures") or ()
                           if isinstance(s, Mapping)],
            "receipt_key": key_id, "review": receipt.get("review"),
            "record_checked": record is not None}


def _principal(writer: Any) -> str | None:
    if isinstance(writer, Mapping) and isinstance(writer.get("kind"), str):
        return f"{writer['kind']}:{writer.get('id')}"
    return None


__all__ = ["FORMAT", "RECEIPT_DOMAIN", "Made", "Refused", "build", "check", "content_digest"]
