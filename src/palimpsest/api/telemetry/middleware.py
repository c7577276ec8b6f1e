"""The outermost ASGI middleware: a request id, metrics, the access log and a span per request.

It wraps everything else (the guard included), so a refusal before any route — a bad
credential, a foreign Host, an oversized body — is counted, logged and carries its request id
like any answer.

- **Request id.** A sane incoming ``X-Request-Id`` (1–128 characters of ``[A-Za-z0-9._:-]``)
  is kept, anything else replaced by a fresh one; it is echoed on every response and written
  in the access log line.
- **Route template.** Labels and log lines name the route's template
  (``/v1/memories/{memory_id}/records``), never the concrete path: after routing Starlette
  leaves the matched route in the scope; for requests answered before routing (the guard, the
  fast ``remember`` handler) the template is found by matching the app's routes.
- **Access log.** One JSON object per line on the ``palimpsest.access`` logger at INFO: time,
  request id, method, route, path (never the query string, which may carry user text; a
  bearer secret pasted into it is redacted), status, duration, bytes sent, member and client
  address — never a credential (the guard reads it; only the member id it stands for is here).
- **Security headers** on every answer (:data:`SECURITY_HEADERS`, HSTS over TLS), unless
  the route set its own.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, Final

from starlette.routing import BaseRoute, Mount, compile_path

from palimpsest import canonical
from palimpsest.api.guard import CREDENTIAL_KEY, PRINCIPAL_KEY, PUBLIC_PATHS
from palimpsest.api.telemetry import audit, tracing
from palimpsest.api.telemetry.metrics import Metrics
from palimpsest.service.model import AuditEntry

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

ACCESS_LOG: Final = logging.getLogger("palimpsest.access")
_REQUEST_ID: Final = re.compile(r"[A-Za-z0-9._:-]{1,128}")
UNMATCHED: Final = "unmatched"


# Every answer carries these unless its route set its own (the API docs page and the review
# desk have their own Content-Security-Policy): JSON is never sniffed, framed, cached or
# leaked in a Referer. HSTS only over TLS (a plain-HTTP answer cannot promise it).
SECURITY_HEADERS: Final = (
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"content-security-policy", b"default-src 'none'; frame-ancestors 'none'"),
    (b"cross-origin-resource-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
)
HSTS: Final = (b"strict-transport-security", b"max-age=31536000")
# A bearer secret pasted into a path must not reach the log (the id before it may).
_SECRET_IN_PATH: Final = re.compile(r"(pal_hcred_[A-Za-z0-9]+_)[A-Za-z0-9_-]+")


def secure_headers(headers: list[tuple[bytes, bytes]], *, https: bool) -> list[tuple[bytes, bytes]]:
    """``headers`` with every :data:`SECURITY_HEADERS` entry the answer did not set itself."""
    present = {bytes(name).lower() for name, _ in headers}
    extra = [pair for pair in (*SECURITY_HEADERS, *((HSTS,) if https else ()))
             if pair[0] not in present]
    return [*headers, *extra]


def request_id(scope: Scope) -> str:
    """The request's id: the client's own when sane, else a fresh one."""
    for name, value in scope.get("headers", ()):
        if name == b"x-request-id":
            text = bytes(value).decode("latin-1")
            if _REQUEST_ID.fullmatch(text):
                return text
            break
    return uuid.uuid4().hex


class RouteTemplates:
    """The app's route templates, matched by hand for requests answered before routing.

    Included routers are walked in order (``original_router``), so the first template that
    matches is the one Starlette would route to; a path that matches only for another method
    gives that template (the 405 it gets is about that route). About 7 µs for the ~80 routes.
    """

    def __init__(self, routes: list[BaseRoute]) -> None:
        self.table: list[tuple[re.Pattern[str], str, frozenset[str] | None]] = []
        self._add(routes)

    def _add(self, routes: list[BaseRoute]) -> None:
        for route in routes:
            nested = getattr(route, "original_router", None)
            if nested is not None:
                self._add(nested.routes)
                continue
            template = getattr(route, "path", None)
            if not isinstance(template, str):
                continue
            if isinstance(route, Mount):
                regex = re.compile(re.escape(template) + "(/.*)?")
                self.table.append((regex, template, None))
                continue
            regex, _, _ = compile_path(template)
            methods = getattr(route, "methods", None)
            self.table.append((regex, template, frozenset(methods) if methods else None))

    def find(self, method: str, path: str) -> tuple[str, dict[str, Any]]:
        partial: tuple[str, dict[str, Any]] | None = None
        for regex, template, methods in self.table:
            match = regex.fullmatch(path)
            if match is None:
                continue
            params = {k: v for k, v in match.groupdict().items() if v is not None}
            if methods is None or method in methods or (method == "HEAD" and "GET" in methods):
                return template, params
            if partial is None:
                partial = template, params
        return partial or (UNMATCHED, {})


class Telemetry:
    """ASGI middleware feeding :class:`.Metrics`, the access log and tracing."""

    def __init__(self, app: ASGIApp, *, metrics: Metrics,
                 routes: Callable[[], list[BaseRoute]],
                 audit: audit.AuditSink | None = None) -> None:
        self.app = app
        self.metrics = metrics
        self.audit = audit
        self.routes = routes  # the app's routes, read when a template must be found by hand
        self._templates: RouteTemplates | None = None
        self.tracer = tracing.tracer()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = request_id(scope)
        scope.setdefault("state", {})["request_id"] = rid
        started = time.perf_counter()
        answer = {"status": 500, "bytes": 0}
        span = self._start_span(scope)

        error_body: list[bytes] = []

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                answer["status"] = int(message["status"])
                message["headers"] = secure_headers(
                    [*message.get("headers", ()), (b"x-request-id", rid.encode())],
                    https=scope.get("scheme") == "https")
            elif message["type"] == "http.response.body":
                chunk = message.get("body", b"")
                answer["bytes"] += len(chunk)
                if answer["status"] >= 400 and answer["bytes"] <= audit.MAX_ERROR_BODY:
                    error_body.append(chunk)
                if not message.get("more_body", False):
                    await self._audit(scope, rid, answer["status"], b"".join(error_body))
            await send(message)

        self.metrics.in_flight.inc()
        try:
            await self.app(scope, receive, send_with_id)
        finally:
            self.metrics.in_flight.dec()
            seconds = time.perf_counter() - started
            method = scope.get("method", "GET")
            route, params = self._route(scope)
            self.metrics.request(method, route, answer["status"], seconds)
            trace_id = self._end_span(span, method, route, params, answer["status"], rid)
            if ACCESS_LOG.isEnabledFor(logging.INFO):
                ACCESS_LOG.info(_line(scope, rid, method, route, answer, seconds, trace_id))

    async def _audit(self, scope: Scope, rid: str, status: int, body: bytes) -> None:
        """Store the entry of a write or refusal before its answer's last byte leaves."""
        if self.audit is None:
            return
        path = scope.get("path", "")
        if path in PUBLIC_PATHS or path == "/ui" or path.startswith("/ui/"):
            return  # no store behind these; the review desk audits nothing yet
        method = scope.get("method", "GET")
        route, params = self._route(scope)
        outcome = audit.outcome(method, status, route, tools_audit_themselves=route == "/mcp")
        if outcome is None:
            return
        caller = scope.get(PRINCIPAL_KEY)
        member = getattr(getattr(caller, "member", None), "id", None)
        await self.audit.record(AuditEntry(
            at=int(time.time() * 1000), surface="http", action=f"{method} {route}",
            outcome=outcome, reason=audit.reason(status, body), status=status,
            member_id=member if isinstance(member, str) else None,
            credential_id=scope.get(CREDENTIAL_KEY), memory_id=audit.memory_of(params),
            request_id=rid))

    def _route(self, scope: Scope) -> tuple[str, dict[str, Any]]:
        route = scope.get("route")
        path = getattr(route, "path", None)
        if isinstance(path, str):
            return path, dict(scope.get("path_params") or {})
        if self._templates is None:
            self._templates = RouteTemplates(self.routes())
        return self._templates.find(scope.get("method", "GET"), scope.get("path", ""))

    def _start_span(self, scope: Scope) -> Any:
        if self.tracer is None:
            return None
        from opentelemetry import propagate, trace  # noqa: PLC0415 -- only with tracing on

        carrier = {k.decode("latin-1"): v.decode("latin-1")
                   for k, v in scope.get("headers", ())}
        method = scope.get("method", "GET")
        return self.tracer.start_span(method, kind=trace.SpanKind.SERVER,
                                      context=propagate.extract(carrier),
                                      attributes={"http.request.method": method})

    @staticmethod
    def _end_span(span: Any, method: str, route: str, params: dict[str, Any],  # noqa: PLR0917
                  status: int, rid: str) -> str | None:
        if span is None:
            return None
        from opentelemetry.trace import Status, StatusCode  # noqa: PLC0415

        span.update_name(f"{method} {route}")
        span.set_attributes({"http.route": route, "http.response.status_code": status,
                             "palimpsest.request_id": rid,
                             **tracing.attributes(method, route, params)})
        if status >= 500:
            span.set_status(Status(StatusCode.ERROR))
        span.end()
        return f"{span.get_span_context().trace_id:032x}"


def _line(scope: Scope, rid: str, method: str, route: str,  # noqa: PLR0917
          answer: dict[str, int], seconds: float, trace_id: str | None) -> str:
    caller = scope.get(PRINCIPAL_KEY)
    member = getattr(getattr(caller, "member", None), "id", None)
    client = scope.get("client")
    line: dict[str, Any] = {
        "time": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "request_id": rid, "method": method, "route": route,
        "path": _SECRET_IN_PATH.sub(r"\1<redacted>", str(scope.get("path", "")).encode(
            "utf-8", "backslashreplace").decode()),
        "status": answer["status"], "duration_ms": round(seconds * 1000, 3),
        "bytes": answer["bytes"], "member": member,
        "client": client[0] if client else None}
    if trace_id is not None:
        line["trace_id"] = trace_id
    return canonical.encode(line).decode("utf-8")


__all__ = ["ACCESS_LOG", "SECURITY_HEADERS", "UNMATCHED", "Telemetry", "request_id",
           "secure_headers"]
