"""Review-desk session policy and CSRF tokens — pure values, no I/O.

A person signs in with a credential; the service opens a session in the store
(:mod:`palimpsest.service.sessions`: it survives a restart and every ``pal serve`` process over
the store shares it) and the browser gets only the random session id, in a cookie
(``HttpOnly``, ``SameSite=Strict``, ``Secure`` over TLS). Every request resumes the session
through the service, which re-checks the credential it was opened with, so revoking that
credential with ``pal admin`` ends its sessions at once.

- A session ends after :data:`IDLE_SECONDS` without a request and, whatever the activity,
  :data:`MAX_SECONDS` after sign-in (``PAL_DESK_IDLE_SECONDS``, ``PAL_DESK_MAX_SECONDS``).
  Signing in again makes a fresh id (no fixation); signing out forgets it everywhere.
- Each session has its own CSRF token, sent in every form and compared in constant time
  (:func:`same_token`) on every state-changing request. Before sign-in, the sign-in form uses
  a double-submit token (a short-lived ``SameSite=Strict`` cookie equal to a hidden field).

This module does not speak HTTP and never sees a request; :mod:`palimpsest.ui.app` does.
"""

from __future__ import annotations

import hmac
import secrets

IDLE_SECONDS = 30 * 60
MAX_SECONDS = 12 * 60 * 60


def same_token(sent: str | None, expected: str) -> bool:
    """Constant-time comparison of a submitted token with the expected one."""
    if not sent or not expected:
        return False
    return hmac.compare_digest(sent.encode("utf-8", "replace"), expected.encode("ascii"))


def new_token() -> str:
    """A fresh random token (URL-safe, 256 bits)."""
    return secrets.token_urlsafe(32)


__all__ = ["IDLE_SECONDS", "MAX_SECONDS", "new_token", "same_token"]
