"""The ASGI guard in front of every route: Host/Origin, bearer credential, size, strict JSON.

It runs before FastAPI sees a request, in this order, and answers with the shared error
envelope when it refuses:

1. **Host and Origin** (security-tests.md F25): when an allowlist is configured (the default for a
   loopback bind), a request naming another host is refused with 421, and a browser ``Origin``
   that is not in the list with 403 — DNS rebinding cannot reach a local server.
2. **Bearer credential** on every route but the public paths (liveness, readiness, metrics,
   the OpenAPI document and its page: ``GET``/``HEAD`` only, nothing of the store in them): no
   credential, a malformed header or an unknown/revoked credential → 401
   ``invalid_credential``. There is no cookie or ambient authentication on the API (the review
   desk below is a separate face with its own sessions).
3. **Size** (security-tests.md A2): a declared ``Content-Length`` over the cap is refused before a
   byte is read; a body that grows past the cap while streaming is refused as soon as it does,
   so the body is never buffered beyond the cap → 413; a body that drips in slower than the
   read deadline is cut off → 408.
4. **Strict JSON**: a JSON body is decoded by :func:`palimpsest.canonical.decode` (no duplicate
   keys, NaN, lone surrogates, BOM, runaway nesting) before FastAPI's lenient parser sees it →
   422 ``memory_invalid``.

5. **Fast handler** (optional, :mod:`.fastpath`): a screened request the handler recognises
   (a well-formed ``remember``) is answered by it, with the bytes the FastAPI route would send;
   everything else goes on to FastAPI.

The review desk (``GuardConfig.session_prefix``, ``/ui``) is a browser face: its requests pass
the same Host/Origin check and a body cap (``Limits.form_body_bytes``), but carry a session
cookie instead of a bearer header and send HTML forms, not JSON, so steps 2 and 4 are the
desk's own (:mod:`palimpsest.ui`: session, CSRF token, exact-origin check on every write).

The guard holds no state besides its configuration and never touches the store directly:
credentials are checked by the ``authenticate`` callable it is given (which answers a
credential seen before from the service's cache, :meth:`MemoryService.cached_caller`).
"""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from palimpsest import canonical
from palimpsest.api.errors import ApiError, from_pal_error, headers_of
from palimpsest.errors import PalError
from palimpsest.service.providers import MAX_FILE_BYTES

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

PRINCIPAL_KEY = "palimpsest.principal"
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1", "[::1]")
# Answered without a credential (api/telemetry, api/apidocs); the Host check still applies.
PUBLIC_PATHS = ("/healthz", "/readyz", "/metrics", "/openapi.json", "/docs", "/docs/docs.js",
                "/docs/docs.css")


@dataclass(frozen=True, slots=True)
class Limits:
    """Every request-size cap of the HTTP face, in one place (security-tests.md A2)."""

    json_body_bytes: int = 1 << 20  # 1 MiB: records, recall requests, observe batches
    file_body_bytes: int = MAX_FILE_BYTES  # one uploaded file (POST /v1/files): the provider's cap
    idempotency_key_chars: int = 255
    header_token_chars: int = 512
    body_read_seconds: float = 30.0  # a slow-drip body is cut off after this (408)
    form_body_bytes: int = 64 << 10  # one review-desk form (a reason, a sign-in)


@dataclass(frozen=True, slots=True)
class GuardConfig:
    """What the guard allows; ``allowed_hosts`` empty means any Host header."""

    limits: Limits = field(default_factory=Limits)
    allowed_hosts: tuple[str, ...] = LOOPBACK_HOSTS
    file_paths: tuple[str, ...] = ("/v1/files",)
    public_paths: tuple[str, ...] = PUBLIC_PATHS
    session_prefix: str = "/ui"  # the review desk: cookie sessions, its own CSRF check


# authenticate(token) -> principal; runs off the event loop (it may touch the store).
Authenticate = Callable[[str], Awaitable[Any]]
# fast(scope, headers, body, receive, send) -> True when it answered a screened request itself
FastPath = Callable[[Scope, dict[str, str], bytes, Receive, Send], Awaitable[bool]]


class Guard:
    """ASGI middleware applying :class:`GuardConfig` and the credential check."""

    def __init__(self, app: ASGIApp, *, config: GuardConfig, authenticate: Authenticate,
                 fast: FastPath | None = None) -> None:
        self.app = app
        self.config = config
        self.authenticate = authenticate
        self.fast = fast  # a hot route answered without the framework (api/fastpath.py)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        path = scope.get("path", "")
        refusal = self._check_host(headers)
        if refusal is not None:
            await send_error(refusal, send, path)
            return
        if path in self.config.public_paths and scope.get("method") in ("GET", "HEAD"):
            await self.app(scope, receive, send)
            return
        prefix = self.config.session_prefix
        desk = bool(prefix) and (path == prefix or path.startswith(prefix + "/"))
        if not desk:
            principal_or_error = await self._principal(headers)
            if isinstance(principal_or_error, ApiError):
                await send_error(principal_or_error, send, path)
                return
            scope[PRINCIPAL_KEY] = principal_or_error
        method = scope.get("method", "GET")
        if method in ("GET", "HEAD", "OPTIONS", "DELETE") and "content-length" not in headers:
            await self.app(scope, receive, send)
            return
        is_file = path in self.config.file_paths
        limits = self.config.limits
        cap = (limits.form_body_bytes if desk else
               limits.file_body_bytes if is_file else limits.json_body_bytes)
        body_or_error = await self._body(headers, receive, cap)
        if is_file and isinstance(body_or_error, ApiError) \
                and body_or_error.code == "x.pal.request_too_large":
            body_or_error = _too_large_upload(cap)
        if isinstance(body_or_error, ApiError):
            await send_error(body_or_error, send, path)
            return
        body = body_or_error
        if desk:  # forms, not JSON; the desk checks its session and CSRF token itself
            await self.app(scope, _replay(body, receive), send)
            return
        if not is_file and body:
            refusal = _check_json(headers, body)
            if refusal is not None:
                await send_error(refusal, send, path)
                return
            if self.fast is not None and await self.fast(scope, headers, body,
                                                         _replay(body, receive), send):
                return
        await self.app(scope, _replay(body, receive), send)

    async def _body(self, headers: dict[str, str], receive: Receive,
                    cap: int) -> bytes | ApiError:
        seconds = self.config.limits.body_read_seconds
        try:
            async with asyncio.timeout(seconds):
                return await _read_body(headers, receive, cap)
        except TimeoutError:
            return ApiError("x.pal.request_timeout",
                            f"the request body did not arrive within {seconds:g} seconds")

    def _check_host(self, headers: dict[str, str]) -> ApiError | None:
        allowed = self.config.allowed_hosts
        if not allowed:
            return None
        host = _host_name(headers.get("host", ""))
        if host not in allowed:
            return ApiError("x.pal.host_not_allowed", "this server does not answer for that host")
        origin = headers.get("origin")
        if origin is not None and _host_name(origin.split("://", 1)[-1]) not in allowed:
            return ApiError("x.pal.origin_not_allowed", "cross-origin requests are refused")
        return None

    async def _principal(self, headers: dict[str, str]) -> Any:
        token = bearer_token(headers.get("authorization", ""),
                             self.config.limits.header_token_chars)
        if token is None:
            return ApiError(
                "invalid_credential",
                "a bearer credential is required: send 'Authorization: Bearer <credential>'",
            )
        try:
            return await self.authenticate(token)
        except PalError:
            return ApiError("invalid_credential", "the credential is unknown or revoked")


def bearer_token(value: str, max_chars: int) -> str | None:
    """The credential of an ``Authorization: Bearer <credential>`` header value (as the guard
    decodes headers: latin-1), or ``None`` when the header is missing or malformed. Only the
    scheme is compared here; the credential is compared in constant time by the service."""
    scheme, _, token = value.partition(" ")
    token = token.strip()
    if (
        not hmac.compare_digest(scheme.lower().encode(), b"bearer")
        or not token
        or len(token) > max_chars
        or not token.isascii()
        or not token.isprintable()
    ):
        return None
    return token


def _headers(scope: Scope) -> dict[str, str]:
    out: dict[str, str] = {}
    for raw_name, raw_value in scope.get("headers", []):
        name = raw_name.decode("latin-1").lower()
        if name not in out:  # first occurrence wins; duplicates cannot smuggle a second value
            out[name] = raw_value.decode("latin-1")
    return out


def _host_name(host: str) -> str:
    host = host.strip().lower()
    if host.startswith("["):
        end = host.find("]")
        return host[: end + 1] if end > 0 else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _too_large_upload(cap: int) -> ApiError:
    """The 413 of ``POST /v1/files``, which cannot send the client to itself."""
    return ApiError(
        "x.pal.request_too_large",
        f"the file is larger than {cap} bytes ({cap / (1 << 20):g} MiB), the most one upload "
        "takes; split it into smaller files and upload each, or keep it elsewhere and name "
        "it in a record's references",
        detail={"limit_bytes": cap},
    )


async def _read_body(headers: dict[str, str], receive: Receive, cap: int) -> bytes | ApiError:
    too_large = ApiError(
        "x.pal.request_too_large",
        f"the request body exceeds {cap} bytes; send less (upload files with POST /v1/files)",
        detail={"limit_bytes": cap},
    )
    declared = headers.get("content-length")
    if declared is not None:
        if not declared.isdigit() or len(declared) > 15:
            return ApiError("memory_invalid", "Content-Length is not a number")
        if int(declared) > cap:
            return too_large
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > cap:
            return too_large
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _check_json(headers: dict[str, str], body: bytes) -> ApiError | None:
    media = headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media != "application/json":
        return ApiError(
            "x.pal.unsupported_media_type",
            "send the request body as application/json",
        )
    try:
        canonical.decode(body, trailing_whitespace=True, allow_floats=True)
    except PalError as exc:
        err = from_pal_error(exc)
        return ApiError("memory_invalid", err.message)
    return None


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()  # later calls wait for the real disconnect

    return replay


async def send_error(error: ApiError, send: Send, path: str = "") -> None:
    """Send one error as a complete response, in the face of the surface ``path`` is on."""
    status, body = error.on(path)
    payload = canonical.encode(body)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
                (b"x-content-type-options", b"nosniff"),
                (b"cache-control", b"no-store"),
            ]
            + [(k.encode(), v.encode()) for k, v in headers_of(error).items()],
        }
    )
    await send({"type": "http.response.body", "body": payload})


__all__ = ["LOOPBACK_HOSTS", "PRINCIPAL_KEY", "PUBLIC_PATHS", "FastPath", "Guard", "GuardConfig",
           "Limits", "bearer_token", "send_error"]
