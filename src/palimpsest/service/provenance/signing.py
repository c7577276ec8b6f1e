"""Signatures on changesets and the published key set — pure.

A changeset is signed over its canonical bytes (:func:`palimpsest.service.history.
canonical_bytes`), the very bytes its id is the SHA-256 of. Those bytes name the changeset's
parents, so a signature also binds the link to the parent: a history re-parented, reordered or
cut is refused by the first signature that no longer verifies. Keys follow repository
memory's rules (:mod:`palimpsest.identity`): canonical unpadded base64, and no weak key
(small order, non-canonical, off the curve) is ever accepted, on registration or on
verification.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from cryptography.exceptions import InvalidSignature

from palimpsest.errors import InvalidInput
from palimpsest.identity import (
    Identity,
    b64_nopad,
    b64_nopad_decode,
    fingerprint,
    verifier,
    weak_key_reason,
)
from palimpsest.service.model import Signature, Wire

KEYS_OBJECT: Final = "provenance.keys"
ALGORITHM: Final = "ed25519"
ROLES: Final = ("server", "member", "origin")  # origin: the server an import came from
SERVER: Final = "server"


def sign(identity: Identity, data: bytes, *, role: str = SERVER, signer: str = SERVER
         ) -> Signature:
    """Sign ``data`` (a changeset's canonical bytes) with ``identity``."""
    return Signature(role, signer, identity.public_key_text, b64_nopad(identity.sign(data)))


def problem(public_key: str, signature: str, data: bytes) -> str | None:
    """Why ``signature`` by ``public_key`` over ``data`` is not acceptable, or ``None``.

    The reasons are the project's own words: a key that is no canonical encoding, a weak key,
    a signature that is no canonical encoding, a signature that does not verify."""
    try:
        raw_key = b64_nopad_decode(public_key, 32, "public key")
    except InvalidInput:
        return "the public key is not canonical unpadded base64 of 32 bytes"
    weak = weak_key_reason(raw_key)
    if weak is not None:
        return f"the {weak} (a weak key)"
    try:
        raw_sig = b64_nopad_decode(signature, 64, "signature")
    except InvalidInput:
        return "the signature is not canonical unpadded base64 of 64 bytes"
    try:
        verifier(raw_key).verify(raw_sig, data)
    except InvalidSignature:
        return "the signature does not verify over the canonical bytes"
    return None


def check_public_key(text: Any) -> str:
    """A member's public key as registered: canonical, and not weak.

    Raises:
        InvalidInput: memory_invalid naming what is wrong with the key.
    """
    if not isinstance(text, str):
        raise InvalidInput("public_key must be a string (unpadded base64 of 32 bytes)",
                           code="memory_invalid", hint="send the key `pal id show` prints")
    try:
        raw = b64_nopad_decode(text, 32, "public key")
    except InvalidInput as exc:
        raise InvalidInput("public_key is not canonical unpadded base64 of 32 bytes",
                           code="memory_invalid",
                           hint="send the key `pal id show` prints") from exc
    weak = weak_key_reason(raw)
    if weak is not None:
        raise InvalidInput(f"public_key refused: {weak}", code="weak-key",
                           hint="make a key with `pal id init` and register that")
    return text


def key_entry(public_key: str, *, status: str, created_at: str,
              retired_at: str | None = None) -> Wire:
    """One key of the published set."""
    raw = b64_nopad_decode(public_key, 32, "public key")
    return {"key_id": fingerprint(raw), "public_key": public_key, "algorithm": ALGORITHM,
            "status": status, "created_at": created_at, "retired_at": retired_at}


def published_keys(keys: list[Wire]) -> Wire:
    """The document a server publishes (``GET /v1/provenance/keys``) and a verifier trusts:
    every key that ever signed for it, the active one and the retired ones."""
    return {"object": KEYS_OBJECT, "algorithm": ALGORITHM,
            "signs": "the canonical bytes of each changeset (memory_git/v1), and receipts",
            "keys": keys}


def trusted_keys(doc: Any) -> dict[str, str]:
    """``key_id -> public key`` from a published key document, checked strictly: every key
    canonical and not weak, its id its fingerprint.

    Raises:
        InvalidInput: ``invalid-keys`` naming the first thing wrong.
    """
    if not isinstance(doc, Mapping) or doc.get("object") != KEYS_OBJECT \
            or not isinstance(doc.get("keys"), list):
        raise InvalidInput("not a published key set (object provenance.keys with keys)",
                           code="invalid-keys",
                           hint="fetch it from GET /v1/provenance/keys of the server")
    out: dict[str, str] = {}
    for entry in doc["keys"]:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("public_key"), str):
            raise InvalidInput("a published key has no public_key", code="invalid-keys")
        try:
            raw = b64_nopad_decode(entry["public_key"], 32, "public key")
        except InvalidInput as exc:
            raise InvalidInput("a published key is not canonical base64",
                               code="invalid-keys") from exc
        if weak_key_reason(raw) is not None:
            raise InvalidInput(f"published key {fingerprint(raw)[:12]} is a weak key",
                               code="invalid-keys")
        if entry.get("key_id") != fingerprint(raw):
            raise InvalidInput("a published key's key_id is not its fingerprint",
                               code="invalid-keys")
        out[fingerprint(raw)] = entry["public_key"]
    return out


def signature_of(value: Any) -> Signature:
    """A signature as a receipt or an export carries it (shape only; :func:`problem` checks
    the cryptography).

    Raises:
        InvalidInput: memory_invalid when a field is missing or of the wrong type.
    """
    if not isinstance(value, Mapping):
        raise InvalidInput("a signature must be an object", code="memory_invalid")
    fields = {k: value.get(k) for k in ("role", "signer", "public_key", "signature")}
    for name, v in fields.items():
        if not isinstance(v, str):
            raise InvalidInput(f"a signature needs {name} (a string)", code="memory_invalid")
    if fields["role"] not in ROLES:
        raise InvalidInput("a signature's role is server, member or origin",
                           code="memory_invalid")
    return Signature(str(fields["role"]), str(fields["signer"]), str(fields["public_key"]),
                     str(fields["signature"]))


__all__ = ["ALGORITHM", "KEYS_OBJECT", "ROLES", "SERVER", "check_public_key", "key_entry",
           "problem", "published_keys", "sign", "signature_of", "trusted_keys"]
