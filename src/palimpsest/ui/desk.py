"""Request-level machinery of the review desk: sessions on requests, forms, origins, pages.

Requests reach the desk through the API guard (Host/Origin allowlist, body cap); from there
this module owns the browser-facing rules:

- **Session**: a page needs a live session (:mod:`.sessions`, kept in the store by the
  service); without one a read redirects to the sign-in page and a write is refused. Each
  request resumes the session through the service, which re-checks its credential, so a
  revoked credential is refused at once, in every process.
- **Writes** (every ``POST``) must carry the session's CSRF token, be a URL-encoded form, and,
  when the browser says where they come from (``Origin``, ``Sec-Fetch-Site``), come from this
  exact origin (scheme, host and port) — the guard's allowlist checks only the host name.
- **Reads** are plain ``GET`` pages that work without JavaScript (the desk has none).

Refusals are the service's own words (``message; hint``, exactly as the API's error bodies say
them).
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import Response

from palimpsest.errors import Conflict, Forbidden, InvalidInput, NotFound, PalError
from palimpsest.service.model import Caller, Session
from palimpsest.ui.facade import DeskService
from palimpsest.ui.render import PREFIX, SECURITY_HEADERS, environment
from palimpsest.ui.sessions import IDLE_SECONDS, MAX_SECONDS, same_token

T = TypeVar("T")
Invoke = Callable[[Callable[[], Any]], Awaitable[Any]]

COOKIE = "pal_desk"
SIGNIN_COOKIE = "pal_desk_signin"
MAX_FORM_FIELDS = 16


@dataclass(frozen=True, slots=True)
class DeskConfig:
    """Session lifetimes (seconds); ``from_env`` reads ``PAL_DESK_IDLE_SECONDS`` and
    ``PAL_DESK_MAX_SECONDS``."""

    idle_seconds: float = IDLE_SECONDS
    max_seconds: float = MAX_SECONDS

    @classmethod
    def from_env(cls) -> DeskConfig:
        """The configuration from the environment (defaults: 30 minutes idle, 12 hours)."""
        def number(name: str, default: float) -> float:
            raw = os.environ.get(name, "")
            try:
                value = float(raw) if raw else default
            except ValueError:
                return default
            return value if value > 0 else default

        return cls(number("PAL_DESK_IDLE_SECONDS", IDLE_SECONDS),
                   number("PAL_DESK_MAX_SECONDS", MAX_SECONDS))


class Refused(Exception):
    """A write refused before it reached the service (session, CSRF, origin, form)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True, slots=True)
class Visit:
    """A signed-in request: its session (with the CSRF token) and the caller."""

    session: Session
    caller: Caller


class Desk:
    """The desk's state: the service door, the sessions, the templates."""

    def __init__(self, calls: DeskService, invoke: Invoke, config: DeskConfig) -> None:
        self.calls = calls
        self.invoke = invoke
        self.config = config
        self.env = environment()

    # --- responses ------------------------------------------------------------------------
    def html(self, template: str, code: int = 200, visit: Visit | None = None, /,
             **context: Any) -> Response:
        """Render a page (HTTP status ``code``) with the security headers."""
        page = self.env.get_template(template).render(
            visit=visit, member=visit.caller.member if visit else None,
            csrf=visit.session.csrf if visit else "", **context)
        return Response(page, status_code=code, media_type="text/html; charset=utf-8",
                        headers=dict(SECURITY_HEADERS))

    def error(self, exc: PalError, visit: Visit | None) -> Response:
        """The service's refusal as a page, with the status the API would use."""
        return self.html("error.html", status_for(exc), visit, message=str(exc))

    # --- sessions -------------------------------------------------------------------------
    async def visit(self, request: Request) -> Visit | None:
        """The signed-in visit of a request, or ``None`` (no, expired or revoked session).

        Raises:
            PalError: the store could not answer (the page shows the service's words).
        """
        session_id = request.cookies.get(COOKIE)
        if not session_id:
            return None
        idle = self.config.idle_seconds
        found: tuple[Session, Caller] | None = await self.invoke(
            lambda: self.calls.resume(session_id, idle_seconds=idle))
        return Visit(*found) if found is not None else None

    async def run(self, fn: Callable[[], T]) -> T:
        """Run facade calls on the service thread."""
        result: T = await self.invoke(fn)
        return result

    async def form(self, request: Request, visit: Visit | None) -> dict[str, str]:
        """A state-changing request's form, after the origin and CSRF checks.

        Raises:
            Refused: cross-origin, not a form, malformed, or without the session's token.
        """
        check_origin(request)
        media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if media != "application/x-www-form-urlencoded":
            raise Refused(415, "send the form as application/x-www-form-urlencoded")
        raw = await request.body()
        try:
            parsed = parse_qs(raw.decode("utf-8"), keep_blank_values=True, strict_parsing=False,
                              max_num_fields=MAX_FORM_FIELDS)
        except (UnicodeDecodeError, ValueError) as exc:
            raise Refused(400, "the form is malformed") from exc
        fields = {k: v[0] for k, v in parsed.items() if len(v) == 1}
        if len(fields) != len(parsed):
            raise Refused(400, "each form field may appear once")
        if visit is not None and not same_token(fields.get("csrf"), visit.session.csrf):
            raise Refused(403, "the form's CSRF token is missing or wrong; reload the page "
                               "and submit again")
        return fields


def status_for(exc: PalError) -> int:
    """The HTTP status the API gives this error class."""
    if exc.code == "invalid_credential":
        return 401
    for cls, status in ((NotFound, 404), (Forbidden, 403), (Conflict, 409),
                        (InvalidInput, 400)):
        if isinstance(exc, cls):
            return status
    return 503


def check_origin(request: Request) -> None:
    """Refuse a write a browser says comes from another origin (or another site).

    Raises:
        Refused: ``Origin`` is not exactly this server's, or ``Sec-Fetch-Site`` is not
            ``same-origin``.
    """
    here = f"{request.url.scheme}://{request.headers.get('host', '')}".lower()
    origin = request.headers.get("origin")
    if origin is not None and origin.lower() != here:
        raise Refused(403, "cross-origin requests are refused")
    site = request.headers.get("sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        raise Refused(403, "cross-origin requests are refused")


def set_cookie(response: Response, request: Request, name: str, value: str, *,
            max_age: int | None) -> None:
    response.set_cookie(name, value, max_age=max_age, path=PREFIX, httponly=True,
                        samesite="strict", secure=request.url.scheme == "https")



__all__ = ["COOKIE", "SIGNIN_COOKIE", "Desk", "DeskConfig", "Invoke", "Refused", "Visit",
           "check_origin", "set_cookie", "status_for"]
