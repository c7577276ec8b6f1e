# ruff: noqa: E501 - seed tables read best one case per line
"""Fuzz target ``credential``: bearer credentials, from the ``Authorization`` header to a caller.

Input: the raw bytes of an ``Authorization`` header value. They are decoded as the guard
decodes headers (latin-1), parsed by :func:`palimpsest.api.guard.bearer_token`, and the token is
then authenticated by a real service over SQLite (:meth:`MemoryService.authenticate`, which
parses the credential id out of the secret and compares hashes in constant time) and looked up
in its cache (:meth:`MemoryService.cached_caller`). The service holds three credentials: two
live ones of two members and a revoked one. Also the input itself as a bare token, so the
service's parser meets bytes the header parser would have refused.

Expected refusals: ``Forbidden`` with code ``invalid_credential``. The header parser refuses by
returning ``None`` (it never raises). Anything else is a finding.

Oracle: a token authenticates **only** if it is byte for byte a live secret, and then as its
own member; the revoked secret never does; the cache answers only for a secret the service
accepted, with the same member; a parsed token is ASCII, printable, at most the header cap and
stripped; the credential id parsed from a secret is a prefix of it.
"""

from __future__ import annotations

from tests.fuzz.harness import (
    Refused,
    Target,
    check,
    files,
    instrumented,
    refusals,
    scratch_dir,
    texts,
)

with instrumented():
    from palimpsest.api.guard import Limits, bearer_token
    from palimpsest.errors import Forbidden
    from palimpsest.service import MemoryService
    from palimpsest.service.admin import credential_id
    from palimpsest.service.model import Credential
    from palimpsest.service.storage.protocol import hash_secret

REFUSALS = refusals({Forbidden: {"invalid_credential"}})
MAX_CHARS = Limits().header_token_chars
_SERVICE: list[MemoryService] = []  # made once per process
SECRETS: dict[str, str] = {}  # live secret → member id
REVOKED: list[str] = []


def _service() -> MemoryService:
    """One service per process, made on first use. Its secrets are fixed (stored through the
    store as ``issue_credential`` stores them: only the hash) so that seeds written by one
    process authenticate in the fuzzing process."""
    if not _SERVICE:
        svc = MemoryService(scratch_dir() / "data", clock=lambda: 1_790_000_000_000)
        store = svc._core.store
        for index, name in enumerate(("alice", "bob", "carol")):
            member = svc.create_member(name, "agent")
            cred = Credential(f"hcred_fuzz{name}", member.id, 1_790_000_000_000, False, "fuzz")
            secret = f"pal_{cred.id}_{'k' * 20}{index}{'Q-_' * 5}"
            with store.write():
                store.insert_credential(cred, hash_secret(secret))
            if name == "carol":
                svc.revoke_credential(cred.id)
                REVOKED.append(secret)
            else:
                SECRETS[secret] = member.id
        _SERVICE.append(svc)
    return _SERVICE[0]


def _authenticate(svc: MemoryService, token: str) -> None:
    parsed = credential_id(token)
    if parsed is not None:
        check(token.startswith(f"pal_{parsed}_"), "the credential id is not the secret's own")
    caller = REFUSALS.attempt(svc.authenticate, token)
    cached = svc.cached_caller(token)
    if isinstance(caller, Refused):
        check(token not in SECRETS, "a live secret was refused")
        check(cached is None, "the cache answers for a secret the service refused")
        return
    check(token in SECRETS, "a token that is no live secret authenticated")
    check(token not in REVOKED, "a revoked secret authenticated")
    check(caller.member.id == SECRETS[token], "a secret authenticated as another member")
    check(cached is not None and cached.member.id == caller.member.id, "the cache disagrees")


def one_input(data: bytes) -> None:
    svc = _service()
    value = data.decode("latin-1")
    token = bearer_token(value, MAX_CHARS)
    if token is not None:
        check(token.isascii() and token.isprintable() and token == token.strip(),
              "a token with non-printable or surrounding characters was parsed")
        check(0 < len(token) <= MAX_CHARS, "a token over the header cap was parsed")
        _authenticate(svc, token)
    if value.isascii():
        _authenticate(svc, value)
    for secret in SECRETS:  # the fuzzer's bytes spliced into a live secret never pass
        if value and value not in secret:
            _authenticate(svc, secret[: len(secret) // 2] + value)


def seeds() -> list[tuple[str, bytes]]:
    _service()
    live = list(SECRETS)
    return [*files("fuzz/credential"), *texts("credential/literal", [
        *(f"Bearer {s}" for s in live), f"bearer  {live[0]}  ", f"BEARER {live[0]}", f"Bearer {REVOKED[0]}",
        f"Basic {live[0]}", f"Bearer {live[0]}\x00", f"Bearer {live[0][:-1]}", f"Bearer {live[0]}x",
        f"Bearer {live[0].replace('pal_', 'pal__')}", "Bearer pal_hcred_x_y", "Bearer pal_hcred__",
        "Bearer pal_hcred", "Bearer " + "a" * 600, "Bearer", "Bearer ", "", "Bearer caf\xe9",
        "B\xe9arer x", f"Token {live[1]}", f"Bearer {live[1]},Bearer {live[0]}", "Bearer pal_hcred_" + "z" * 200 + "_s",
    ])]  # fmt: skip


TARGET = Target(
    name="credential",
    one_input=one_input,
    refusals=REFUSALS,
    seeds=seeds,
    classes=("A2", "B7", "F25"),
    runs=3_000,
    summary="Authorization header → bearer token → credential id → hash check and cache (SQLite)",
    dictionary=(b"Bearer ", b"bearer ", b"pal_hcred_", b"_", b"\t", b"\x00", b"\xff"),
)

if __name__ == "__main__":
    TARGET.fuzz()
