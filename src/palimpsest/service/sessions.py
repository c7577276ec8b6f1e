"""Review-desk sessions: a person signs in once with a credential and browses with a session.

A session lives in the store (:meth:`Store.insert_session` and its siblings), so it survives a
restart and every ``pal serve`` process over the same store shares it. The browser holds only
the session id, 256 random bits in an ``HttpOnly`` cookie; the store keeps the SHA-256 of that
id, the member, the credential's id (never its secret), the session's CSRF token, and two
deadlines:

- ``idle_until``: the session ends after ``idle`` milliseconds without a request (each request
  moves the deadline on; to the second, so a burst of requests writes once);
- ``expires_at``: whatever the activity, ``max`` milliseconds after sign-in.

Every request re-checks the credential the session was opened with, so revoking it (``pal
admin``, any process) ends its sessions at the next request. Signing in makes a fresh id (no
fixation) and forgets ended sessions; a member keeps at most :data:`MAX_PER_MEMBER` live ones
(the oldest go first). Signing out forgets the session everywhere.

The rules (:func:`key_of`, :func:`ended`, :func:`touched`) are pure; the functions below them
run them over the store in one transaction each. This module never sees HTTP.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import replace
from typing import Final

from palimpsest.service import admin
from palimpsest.service.core import Core
from palimpsest.service.model import Caller, Session

MAX_PER_MEMBER: Final = 100
TOUCH_MS: Final = 1000  # the idle deadline moves in steps of at least a second
MAX_ID_CHARS: Final = 128


# --- pure --------------------------------------------------------------------------------------
def key_of(session_id: str | None) -> str | None:
    """The stored key of a cookie value (``None`` for a missing or malformed one)."""
    if not session_id or len(session_id) > MAX_ID_CHARS or not session_id.isascii():
        return None
    return _digest(session_id)


def _digest(session_id: str) -> str:
    return hashlib.sha256(session_id.encode("ascii")).hexdigest()


def ended(session: Session, now: int) -> bool:
    """Whether the session is over at ``now`` (idle too long, or past its age limit)."""
    return now >= session.idle_until or now >= session.expires_at


def touched(session: Session, now: int, idle_ms: int) -> Session | None:
    """The session with its idle deadline moved on by a request at ``now``; ``None`` when it
    would move by less than :data:`TOUCH_MS` (nothing to write)."""
    until = min(now + idle_ms, session.expires_at)
    return replace(session, idle_until=until) if until - session.idle_until >= TOUCH_MS else None


# --- over the store ----------------------------------------------------------------------------
def open_session(core: Core, secret: str, *, idle_ms: int,
                 max_ms: int) -> tuple[str, Session, Caller]:
    """Sign in with a bearer secret: ``(session id for the cookie, session, caller)``.

    Raises:
        Forbidden: ``invalid_credential`` for an unknown, malformed or revoked secret.
    """
    caller, credential = admin.authenticate_credential(core, secret)
    session_id = secrets.token_urlsafe(32)
    now = core.now_ms()
    session = Session(_digest(session_id), caller.member.id, credential,
                      secrets.token_urlsafe(32), now, min(now + idle_ms, now + max_ms),
                      now + max_ms)
    with core.store.write():
        core.store.purge_sessions(now, caller.member.id, MAX_PER_MEMBER - 1)
        core.store.insert_session(session)
    return session_id, session, caller


def resume(core: Core, session_id: str | None, *, idle_ms: int) -> tuple[Session, Caller] | None:
    """The live session of a cookie value and its caller, its idle deadline moved on; ``None``
    (and the session forgotten) when it ended, its credential was revoked or no longer names
    its member, or the member is gone."""
    key = key_of(session_id)
    if key is None:
        return None
    now = core.now_ms()
    with core.store.read():
        session = core.store.session(key)
        if session is None:
            return None
        found = core.store.credential_hash(session.credential_id)
        member = core.store.member(session.member_id)
        live = (not ended(session, now) and found is not None and not found[2]
                and found[0] == session.member_id and member is not None)
        caller = core.caller_for(session.member_id) if live else None
    if caller is None:
        with core.store.write():
            core.store.delete_session(key)
        return None
    moved = touched(session, now, idle_ms)
    if moved is not None:
        with core.store.write():
            if not core.store.touch_session(key, moved.idle_until):
                return None  # signed out meanwhile (another process)
        session = moved
    return session, caller


def close(core: Core, session_id: str | None) -> None:
    """Sign out: forget the session (an unknown or malformed id is ignored)."""
    key = key_of(session_id)
    if key is not None:
        with core.store.write():
            core.store.delete_session(key)


__all__ = ["MAX_PER_MEMBER", "TOUCH_MS", "close", "ended", "key_of", "open_session", "resume",
           "touched"]
