"""Review-desk sessions and CSRF tokens — pure values over a clock, no I/O.

A person signs in with a credential; the desk keeps that credential **server-side** in a
:class:`Session` and gives the browser only a random session id in a cookie (``HttpOnly``,
``SameSite=Strict``, ``Secure`` over TLS). Every request re-authenticates the kept credential
through the service, so a credential revoked with ``pal admin`` stops its sessions at once.

- The cookie carries 32 random bytes; the store keys sessions by their SHA-256, so even a dump
  of the process memory's keys does not give a usable cookie.
- A session expires after ``idle_seconds`` without a request and, whatever the activity, after
  ``max_seconds``. Signing in again makes a fresh id (no fixation); signing out forgets it.
- Each session has its own CSRF token, sent in every form and compared in constant time on
  every state-changing request. Before sign-in, the sign-in form uses a double-submit token (a
  short-lived ``SameSite=Strict`` cookie equal to a hidden field).

This module does not speak HTTP and never sees a request; :mod:`palimpsest.ui.app` does.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace

Clock = Callable[[], float]  # seconds

IDLE_SECONDS = 30 * 60
MAX_SECONDS = 12 * 60 * 60
MAX_SESSIONS = 10_000  # the oldest are dropped beyond this


@dataclass(frozen=True, slots=True)
class Session:
    """One signed-in browser: the kept credential, its CSRF token and its times."""

    credential: str  # never leaves the server
    member_id: str
    csrf: str
    created: float
    seen: float


def _key(session_id: str) -> str:
    return hashlib.sha256(session_id.encode("ascii", "replace")).hexdigest()


def same_token(sent: str | None, expected: str) -> bool:
    """Constant-time comparison of a submitted token with the expected one."""
    if not sent or not expected:
        return False
    return hmac.compare_digest(sent.encode("utf-8", "replace"), expected.encode("ascii"))


def new_token() -> str:
    """A fresh random token (URL-safe, 256 bits)."""
    return secrets.token_urlsafe(32)


class SessionStore:
    """Sessions in this process's memory (a restart signs everyone out)."""

    def __init__(self, *, idle_seconds: float = IDLE_SECONDS, max_seconds: float = MAX_SECONDS,
                 clock: Clock | None = None, capacity: int = MAX_SESSIONS) -> None:
        """Keep at most ``capacity`` sessions, each expiring as the module docs say."""
        self.idle_seconds = idle_seconds
        self.max_seconds = max_seconds
        self._clock: Clock = clock or time.monotonic
        self._capacity = capacity
        self._lock = threading.Lock()
        self._sessions: OrderedDict[str, Session] = OrderedDict()

    def open(self, credential: str, member_id: str) -> tuple[str, Session]:
        """Start a session; returns the cookie value (shown to the browser only) and it."""
        session_id = new_token()
        now = self._clock()
        session = Session(credential, member_id, new_token(), now, now)
        with self._lock:
            self._sessions[_key(session_id)] = session
            while len(self._sessions) > self._capacity:
                self._sessions.popitem(last=False)
        return session_id, session

    def get(self, session_id: str | None) -> Session | None:
        """The live session of a cookie value (its idle timer restarts), or ``None``."""
        if not session_id or len(session_id) > 128:
            return None
        key = _key(session_id)
        now = self._clock()
        with self._lock:
            session = self._sessions.get(key)
            if session is None:
                return None
            if now - session.seen > self.idle_seconds or now - session.created > self.max_seconds:
                del self._sessions[key]
                return None
            session = replace(session, seen=now)
            self._sessions[key] = session
            return session

    def close(self, session_id: str | None) -> None:
        """Forget a session (sign-out); unknown ids are ignored."""
        if session_id:
            with self._lock:
                self._sessions.pop(_key(session_id), None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)


__all__ = ["IDLE_SECONDS", "MAX_SECONDS", "Session", "SessionStore", "new_token", "same_token"]
