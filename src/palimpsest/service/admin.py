"""Members, groups, memberships and credentials — operator actions for ``pal admin`` and the
first start, plus bearer authentication for the API."""

from __future__ import annotations

import hmac
import secrets
from typing import Final

from palimpsest.errors import Forbidden, NotFound
from palimpsest.service import wire
from palimpsest.service.core import Core, mint
from palimpsest.service.model import (
    INVALID_CREDENTIAL,
    MEMBER_TYPES,
    Caller,
    Credential,
    Group,
    Member,
    invalid,
)
from palimpsest.service.storage.protocol import hash_secret

SECRET_PREFIX = "pal"  # noqa: S105 (a prefix, not a secret)


def create_member(core: Core, name: str, type: str, admin: bool) -> Member:
    """Add a member (human or agent)."""
    name = wire.string(name, "name", max_len=wire.MAX_NAME)
    if type not in MEMBER_TYPES:
        raise invalid("a member's type is human or agent")
    m = Member(mint("hmbr"), name, type, admin, core.now_ms())
    with core.store.write():
        core.store.insert_member(m)
    return m


def get_member(core: Core, member_id: str) -> Member:
    """One member."""
    m = core.store.member(member_id)
    if m is None:
        raise NotFound("no such member", code="member_not_found")
    return m


def create_group(core: Core, name: str) -> Group:
    """Add a group."""
    name = wire.string(name, "name", max_len=wire.MAX_NAME)
    g = Group(mint("hgrp"), name, core.now_ms())
    with core.store.write():
        core.store.insert_group(g)
        core.store.bump_tree()
    return g


def set_membership(core: Core, group_id: str, member_id: str, present: bool) -> Group:
    """Add a member to a group or take it out (idempotent)."""
    with core.store.write():
        if core.store.group(group_id) is None:
            raise NotFound("no such group", code="group_not_found")
        get_member(core, member_id)
        core.store.set_membership(group_id, member_id, present)
        g = core.store.group(group_id)
    if g is None:  # removed concurrently
        raise NotFound("no such group", code="group_not_found")
    return g


def issue_credential(core: Core, member_id: str, label: str) -> tuple[Credential, str]:
    """A new bearer secret ``pal_<credential id>_<256 random bits>``; only its hash is kept."""
    get_member(core, member_id)
    label = wire.string(label, "label", max_len=wire.MAX_NAME, blank=True)
    cred = Credential(mint("hcred"), member_id, core.now_ms(), False, label)
    secret = f"{SECRET_PREFIX}_{cred.id}_{secrets.token_urlsafe(32)}"
    with core.store.write():
        core.store.insert_credential(cred, hash_secret(secret))
    return cred, secret


def revoke_credential(core: Core, credential_id: str) -> Credential:
    """Revoke a credential; it stops authenticating at once."""
    with core.store.write():
        if not core.store.revoke(credential_id):
            raise NotFound("no such credential", code="credential_not_found")
    return next(c for c in core.store.credentials(None) if c.id == credential_id)


def credential_id(secret: str) -> str | None:
    """The credential id a well-formed bearer secret names (``None``: malformed); says
    nothing about whether the secret is valid."""
    if not isinstance(secret, str) or len(secret) > 200:
        return None
    parts = secret.split("_")
    # pal _ hcred _ <id> _ <secret>: the secret itself may contain "_" (urlsafe base64).
    if len(parts) < 4 or parts[0] != SECRET_PREFIX or parts[1] != "hcred":
        return None
    return f"{parts[1]}_{parts[2]}"


def authenticate(core: Core, secret: str) -> Caller:
    """The caller a bearer secret stands for (constant-time hash comparison)."""
    return authenticate_credential(core, secret)[0]


def authenticate_credential(core: Core, secret: str) -> tuple[Caller, str]:
    """:func:`authenticate`, also naming the credential the secret belongs to."""
    refuse = Forbidden("the credential is not valid", code=INVALID_CREDENTIAL,
                       hint="send Authorization: Bearer <credential from pal admin>")
    cred_id = credential_id(secret)
    if cred_id is None:
        raise refuse
    with core.store.read():
        generation = core.store.principals_generation()
        found = core.store.credential_hash(cred_id)
        if found is None:
            hmac.compare_digest(hash_secret(secret), hash_secret(""))  # same work either way
            raise refuse
        member_id, stored, revoked = found
        digest = hash_secret(secret)
        if not hmac.compare_digest(stored, digest) or revoked:
            raise refuse
        caller = core.caller_for(member_id)
    if len(_cache(core)) >= AUTH_CACHE_SIZE:
        _cache(core).clear()
    _cache(core)[digest] = (generation, caller)
    return caller, cred_id


def cached_caller(core: Core, secret: str) -> Caller | None:
    """The caller of a secret that :func:`authenticate` accepted, if nothing about members,
    groups or credentials changed since (any process: the stored generation is re-read each
    time); ``None`` means "authenticate it". Takes no store lock and never waits, so an event
    loop may call it. Only accepted secrets are kept, under their SHA-256."""
    if not isinstance(secret, str) or len(secret) > 200:
        return None
    cache = _cache(core)
    entry = cache.get(hash_secret(secret))
    if entry is None:
        return None
    generation = core.store.peek_principals_generation()
    if generation != entry[0]:
        if generation is not None:
            cache.clear()  # stale: a credential, member or group changed
        return None
    return entry[1]


AUTH_CACHE_SIZE: Final = 4096


def _cache(core: Core) -> dict[str, tuple[int, Caller]]:
    return core.auth_cache


def bootstrap_owner(core: Core, name: str) -> tuple[Member, str] | None:
    """The first start's admin member and its credential, once."""
    if core.store.members():
        return None
    m = create_member(core, name, "human", True)
    _, secret = issue_credential(core, m.id, "first start")
    return m, secret


__all__ = ["authenticate", "authenticate_credential", "bootstrap_owner", "cached_caller",
           "create_group", "create_member", "credential_id", "get_member", "issue_credential",
           "revoke_credential", "set_membership"]
