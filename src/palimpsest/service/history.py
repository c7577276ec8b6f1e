"""Memory Git history of the service: changesets, refs, idempotency and projection — pure.

Every write to a memory is one immutable :class:`Changeset` on a ref of that memory
(``refs/shared/main`` for a direct write). Its id is its integrity digest: SHA-256 over the
canonical JSON of its content (memory-git.md §6, ``changeset_id`` and ``created_at`` excluded),
so the id is verified on every read by recomputing it. A ref advances by compare-and-swap on its
expected head; several refs per memory exist side by side (``refs/agents/<member>/*`` … are
added by the review workflow), each with its own CAS.

Records, versions and the search index are *projections* of the changesets reachable from
``refs/shared/main``: :mod:`palimpsest.service.projection` turns each op into what changes, in
the same transaction as the changeset, and ``rebuild`` replays them from scratch.

What a client states is not inside the changeset's canonical bytes: a UHP op names the digest
of its record body and a Memory Git op the digest of its payload; both are stored apart, once,
content-addressed (SHA-256 of the canonical JSON, nothing else), so ``erase`` can remove the
bytes while history stays intact and verifiable. Nothing here draws on a clock, a salt or a
random id, so a projection re-derived from the same changesets is the same, byte for byte.
(A digest of erased content could confirm a guess of it; the history is readable only by the
memory's readers, who could read the content before it was erased.)
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Final

from palimpsest import canonical
from palimpsest.errors import Conflict, Unavailable
from palimpsest.service.memorygit import ops as gitops
from palimpsest.service.model import (
    CAS_MISMATCH,
    CHANGESET_EXTRA,
    IDEMPOTENCY_MISMATCH,
    INTEGRITY,
    SCHEMA_VERSION,
    Changeset,
    Op,
    Principal,
    RecordBody,
    invalid,
    payload_bytes,
)

WRITER_KEYS: Final = ("written_at", "written_by", "on_behalf_of", "consolidation_id")
# Closed payload keys per op type (memory-git.md §4 for the idea; these are the service's ops).
OP_KEYS: Final[Mapping[str, frozenset[str]]] = {
    "add_record": frozenset({"record_id", "body_digest", "summary", *WRITER_KEYS}),
    "revise_record": frozenset({"body_digest", "summary", "reason", *WRITER_KEYS}),
    "forget_record": frozenset({"summary", *WRITER_KEYS}),
    "erase_record": frozenset({"summary", *WRITER_KEYS}),
}
TARGETED: Final = frozenset({"revise_record", "forget_record", "erase_record"})
MAX_OPS: Final = 1000
MAX_OP_BYTES: Final = 64 * 1024


def digest(value: Any) -> str:
    """SHA-256 hex of the canonical JSON of ``value``."""
    return hashlib.sha256(canonical.encode(value)).hexdigest()


def kept_apart(op: Op) -> Op:
    """A Memory Git op with its payload digest set (its payload is client content)."""
    if op.op_type in gitops.OP_TYPES and op.payload_digest is None:
        data = payload_bytes(op.payload or {})
        return replace(op, payload_digest=hashlib.sha256(data).hexdigest())
    return op


def validate_op(op: Op) -> None:
    """Closed-key and shape check of one op; raises memory_invalid by name."""
    if op.op_type in gitops.OP_TYPES:  # the eight Memory Git ops: one registry, in gitops
        gitops.check_stored_op(op.op_type, op.target, op.result, op.payload or {})
        return
    allowed = OP_KEYS.get(op.op_type)
    if allowed is None or op.payload is None:
        raise invalid(f"unknown op_type {op.op_type!r}")
    for key in op.payload:
        if key not in allowed:
            raise invalid(f"op {op.op_type}: payload key {key!r} is not allowed")
    if (op.target is None) == (op.op_type in TARGETED):
        raise invalid(f"op {op.op_type}: target_event_id is "
                      f"{'required' if op.op_type in TARGETED else 'not allowed'}")
    for key in ("written_at", "written_by"):
        if key not in op.payload:
            raise invalid(f"op {op.op_type}: payload needs {key}")
    if op.op_type in ("add_record", "revise_record") and not isinstance(
            op.payload.get("body_digest"), str):
        raise invalid(f"op {op.op_type}: payload needs body_digest")
    if op.op_type == "add_record" and not isinstance(op.payload.get("record_id"), str):
        raise invalid("op add_record: payload needs record_id")
    if len(canonical.encode(dict(op.payload))) > MAX_OP_BYTES:
        raise invalid(f"op {op.op_type}: payload exceeds {MAX_OP_BYTES} bytes")


def content_of(memory_id: str, ref_name: str, parent_ids: Sequence[str], author: str,  # noqa: PLR0917
               message: str, idempotency_key: str, ops: Sequence[Op],
               extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The digested content of a changeset (keys sorted, as Go marshals a map): its canonical
    bytes are ``canonical.encode`` of this, and its id their SHA-256. Ops appear in their
    canonical form (payloads kept apart by digest); the optional Memory Git fields
    (:data:`CHANGESET_EXTRA`) count only when set. ``changeset_id`` and ``created_at`` are
    not covered (memory-git.md §6)."""
    out = {
        "author_principal": author,
        "idempotency_key": idempotency_key,
        "message": message,
        "ops": [op.canonical(i) for i, op in enumerate(ops)],
        "parent_ids": list(parent_ids),
        "project_id": memory_id,
        "ref_name": ref_name,
        "schema_version": SCHEMA_VERSION,
    }
    out.update({k: v for k, v in (extra or {}).items() if k in CHANGESET_EXTRA and v})
    return dict(sorted(out.items()))


def make_changeset(memory_id: str, ref_name: str, parent_ids: Sequence[str], author: str,  # noqa: PLR0917
                   message: str, idempotency_key: str, ops: Sequence[Op],
                   created_at: str, extra: Mapping[str, Any] | None = None) -> Changeset:
    """Validate ops and build the changeset whose id is its integrity digest (the one way
    every changeset is made, UHP writes and Memory Git commits alike)."""
    if len(ops) > MAX_OPS:
        raise invalid(f"a changeset holds at most {MAX_OPS} ops")
    for op in ops:
        validate_op(op)
    sealed = tuple(kept_apart(op) for op in ops)
    kept = {k: v for k, v in (extra or {}).items() if k in CHANGESET_EXTRA and v}
    cid = digest(content_of(memory_id, ref_name, parent_ids, author, message, idempotency_key,
                            sealed, kept))
    return Changeset(cid, memory_id, ref_name, tuple(parent_ids), author, message, created_at,
                     idempotency_key, sealed, kept)


def canonical_bytes(cs: Changeset) -> bytes:
    """The bytes a changeset's id digests and its signatures sign: the canonical JSON of its
    content (:func:`content_of`), payloads kept apart named by digest — so an erased payload
    leaves every signature verifiable."""
    return canonical.encode(content_of(cs.memory_id, cs.ref_name, cs.parent_ids, cs.author,
                                       cs.message, cs.idempotency_key, cs.ops, cs.extra))


def verify(cs: Changeset) -> Changeset:
    """Recompute the digest (and each payload kept apart against its own digest); a stored
    changeset that does not match is refused. An erased payload verifies by its digest."""
    expect = hashlib.sha256(canonical_bytes(cs)).hexdigest()
    damaged = any(op.payload_digest is not None and op.payload is not None
                  and hashlib.sha256(payload_bytes(op.payload)).hexdigest() != op.payload_digest
                  for op in cs.ops)
    if expect != cs.id or damaged:
        raise Unavailable(f"changeset {cs.id[:12]} fails its integrity digest", code=INTEGRITY,
                          hint="restore the database from a backup")
    return cs


def check_head(expected: str | None, current: str | None, ref_name: str) -> None:
    """Compare-and-swap: the ref must still point where the writer read it."""
    if expected != current:
        raise Conflict(f"{ref_name} moved: expected head {expected or 'none'}, "
                       f"current head {current or 'none'}", code=CAS_MISMATCH,
                       hint="re-read the ref and resubmit with a new idempotency key")


def request_digest(operation: str, scope: str, request: Any) -> str:
    """Digest of a normalised write request, compared on an idempotent replay."""
    return digest({"operation": operation, "scope": scope, "request": request})


def check_replay(stored_digest: str | None, new_digest: str) -> None:
    """A reused idempotency key must carry the identical request (fail closed)."""
    if stored_digest != new_digest:
        raise Conflict("this Idempotency-Key was used for a different request",
                       code=IDEMPOTENCY_MISMATCH, hint="use a new Idempotency-Key")


# --- record bodies -----------------------------------------------------------------------------
def seal_body(body: RecordBody) -> tuple[str, bytes]:
    """A record body's content address and canonical bytes: ``(sha256 hex, bytes)``."""
    data = canonical.encode(body.to_wire())
    return hashlib.sha256(data).hexdigest(), data


def body_matches(digest_hex: str, data: bytes) -> bool:
    """Stored bytes still hash to the digest an op names."""
    return hashlib.sha256(data).hexdigest() == digest_hex


# --- writers -----------------------------------------------------------------------------------
def principal_of(value: Any) -> Principal:
    """``{kind, id, type?}`` from a payload."""
    return Principal(value["kind"], value["id"], value.get("type"))


def writer_payload(written_at: str, writer: Principal, *, on_behalf_of: Principal | None = None,
                   consolidation_id: str | None = None) -> dict[str, Any]:
    """The writer fields every op carries (stamped by the server, never by the client)."""
    out: dict[str, Any] = {"written_at": written_at, "written_by": writer.to_wire()}
    if on_behalf_of is not None:
        out["on_behalf_of"] = on_behalf_of.to_wire()
    if consolidation_id is not None:
        out["consolidation_id"] = consolidation_id
    return out


__all__ = [name for name in dir() if not name.startswith("_")]
