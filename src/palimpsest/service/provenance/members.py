"""Members' own keys and signatures: register a public key, sign one's own changesets.

A member signs client-side: it reads the changeset it wrote (its canonical bytes are what
``GET …/changesets/{id}/signatures`` returns as ``canonical``, base64), checks that they hold
what it asked for, signs them with a key it registered, and sends the signature. The server
keeps it beside its own only when the key is the author's, not revoked, not weak, and the
signature verifies over those exact bytes; anything else is refused, naming why, and nothing
is kept.
"""

from __future__ import annotations

import base64
from typing import Any

from palimpsest.errors import NotFound
from palimpsest.service import history
from palimpsest.service.core import Core
from palimpsest.service.model import (
    Caller,
    Changeset,
    MemberKey,
    Signature,
    Wire,
    invalid,
    not_found,
)
from palimpsest.service.provenance import signing
from palimpsest.service.wire import obj


def _scope(caller: Caller) -> str:
    return f"member:{caller.member.id}"


def register_key(core: Core, caller: Caller, body: Any, key: str | None = None) -> Wire:
    """Register a public key for the caller (repository memory's weak-key rules apply)."""
    b = obj(body, "body", ("public_key",))
    public = signing.check_public_key(b.get("public_key"))

    def apply(_key: str) -> Wire:
        made = MemberKey(caller.member.id, public, core.now_ms())
        core.store.insert_member_key(made)
        return made.to_wire()

    return core.idempotent(caller, _scope(caller), "register_key", {"public_key": public}, key,
                           apply)


def list_keys(core: Core, caller: Caller) -> Wire:
    """The caller's keys, revoked ones included."""
    with core.store.read():
        keys = core.store.member_keys(caller.member.id)
    return {"object": "list", "data": [k.to_wire() for k in keys]}


def revoke_key(core: Core, caller: Caller, key_id: str, key: str | None = None) -> Wire:
    """Stop one of the caller's keys from signing anything new."""

    def apply(_key: str) -> Wire:
        found = [k for k in core.store.member_keys(caller.member.id) if k.key_id == key_id]
        if not found:
            raise NotFound("you have no key with that key_id", code="memory_not_found",
                           hint="list your keys first (GET /v1/members/me/keys)")
        core.store.revoke_member_key(caller.member.id, found[0].public_key)
        return MemberKey(caller.member.id, found[0].public_key, found[0].created_at,
                         True).to_wire()

    return core.idempotent(caller, _scope(caller), "revoke_key", {"key_id": key_id}, key,
                           apply)


def _readable(core: Core, caller: Caller, memory_id: str, cid: str) -> Changeset:
    """A changeset of a memory the caller may read (unknown and hidden answer alike)."""
    core.resolve(caller, memory_id, "read")
    cs = core.store.changeset(cid) if isinstance(cid, str) else None
    if cs is None or cs.memory_id != memory_id:
        raise not_found()
    return history.verify(cs)


def signatures_wire(cs: Changeset, sigs: list[Signature]) -> Wire:
    """A changeset's canonical bytes and every signature kept for it."""
    data = history.canonical_bytes(cs)
    return {"object": "memory.changeset.signatures", "changeset_id": cs.id,
            "memory_id": cs.memory_id, "author": cs.author,
            "canonical": base64.b64encode(data).decode("ascii"),
            "signatures": [s.to_wire() for s in sigs]}


def changeset_signatures(core: Core, caller: Caller, memory_id: str, cid: str) -> Wire:
    """What a member signs (the canonical bytes) and the signatures kept so far."""
    with core.store.read():
        cs = _readable(core, caller, memory_id, cid)
        sigs = core.store.signatures([cs.id]).get(cs.id, [])
    return signatures_wire(cs, sigs)


def countersign(core: Core, caller: Caller, memory_id: str, cid: str, body: Any,  # noqa: PLR0917
                idempotency_key: str | None = None) -> Wire:
    """Keep the author's own signature of its changeset, once checked."""
    b = obj(body, "body", ("public_key", "signature"))
    key, sig = b.get("public_key"), b.get("signature")
    if not isinstance(key, str) or not isinstance(sig, str):
        raise invalid("send public_key and signature (unpadded base64)")
    request = {"changeset_id": cid, "public_key": key, "signature": sig}

    def check() -> None:
        core.resolve(caller, memory_id, "read")

    return core.idempotent(caller, memory_id, "sign_changeset", request, idempotency_key,
                           lambda _k: _countersign(core, caller, memory_id, cid, key, sig),
                           check)


def _countersign(core: Core, caller: Caller, memory_id: str, cid: str, key: str,  # noqa: PLR0917
                 sig: str) -> Wire:
    cs = _readable(core, caller, memory_id, cid)
    me = f"member:{caller.member.id}"
    if cs.author != me:
        raise invalid(f"only the author ({cs.author}) signs a changeset as its member",
                      hint="sign the changesets you wrote")
    mine = {k.public_key: k for k in core.store.member_keys(caller.member.id)}
    if key not in mine:
        raise invalid("this public key is not registered to you",
                      hint="register it first: POST /v1/members/me/keys")
    if mine[key].revoked:
        raise invalid("this key was revoked", hint="register a new key and sign with it")
    reason = signing.problem(key, sig, history.canonical_bytes(cs))
    if reason is not None:
        raise invalid(f"signature refused: {reason}",
                      hint="sign the exact bytes `canonical` holds (base64-decoded)")
    core.store.add_signature(cs.id, Signature("member", me, key, sig))
    sigs = core.store.signatures([cs.id]).get(cs.id, [])
    return signatures_wire(cs, sigs)


__all__ = ["changeset_signatures", "countersign", "list_keys", "register_key", "revoke_key",
           "signatures_wire"]
