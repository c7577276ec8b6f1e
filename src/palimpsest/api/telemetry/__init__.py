"""Operating the HTTP face: health, readiness, metrics, the access log, request ids, tracing.

:class:`Observability` is made once per app by :func:`palimpsest.api.app.create_app`:

- ``GET /healthz`` — liveness: 200 ``{"status": "ok"}`` while the process answers; no
  credential, no information;
- ``GET /readyz`` — readiness: 200 ``{"status": "ready"}`` when the store answered a lookup on
  the service thread within two seconds, else 503;
- ``GET /metrics`` — the Prometheus text exposition (:mod:`.metrics`);
- the outermost middleware (:mod:`.middleware`): ``X-Request-Id`` on every answer, the
  structured access log, the metrics of every request, and a span per request when an
  OpenTelemetry SDK is configured (:mod:`.tracing`).

These three routes and the API documentation need no credential (the guard's public paths;
its Host check still applies). Nothing here reads or writes memory.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

from fastapi import FastAPI
from fastapi.responses import Response

from palimpsest.api.runtime import Runner, json_response
from palimpsest.api.telemetry.metrics import Metrics
from palimpsest.api.telemetry.middleware import Telemetry
from palimpsest.errors import Forbidden
from palimpsest.service.memories import MemoryService

READY_SECONDS: Final = 2.0
_PUBLIC: Final[dict[str, Any]] = {"security": []}  # OpenAPI: no credential for this operation
_STATUS = {"type": "object", "required": ["status"],
           "properties": {"status": {"type": "string"}}}


def _json(description: str) -> dict[str, object]:
    return {"description": description, "content": {"application/json": {"schema": _STATUS}}}


class Observability:
    """The metrics of one app and the hooks the app calls."""

    def __init__(self, *, worker: int = 0) -> None:
        self.metrics = Metrics(worker=worker)

    def credential_checked(self, *, cached: bool) -> None:
        """A bearer credential was answered from the cache (or had to go to the store)."""
        self.metrics.credential_cache.labels("hit" if cached else "miss").inc()

    def group_committed(self, size: int) -> None:
        """``size`` remember calls were committed in one transaction."""
        self.metrics.group_commit.observe(size)

    def install(self, app: FastAPI, svc: MemoryService, run: Runner) -> None:
        """Add the routes and the outermost middleware to ``app`` (call it after every other
        middleware, so this one wraps them)."""
        metrics = self.metrics

        @app.api_route("/healthz", methods=["GET", "HEAD"], tags=["operations"],
                       summary="Liveness (no credential)", response_class=Response,
                       openapi_extra=_PUBLIC, responses={200: _json("the process answers")})
        async def healthz() -> Response:
            return json_response({"status": "ok"})

        def probe() -> None:
            # the credential lookup every request starts with: the store must answer it
            try:
                svc.authenticate("pal_hcred_readiness_probe")
            except Forbidden:
                return

        @app.api_route("/readyz", methods=["GET", "HEAD"], tags=["operations"],
                       summary="Readiness: the store answers", response_class=Response,
                       openapi_extra=_PUBLIC,
                       responses={200: _json("ready to serve"),
                                  503: _json("the store does not answer")})
        async def readyz() -> Response:
            try:
                await asyncio.wait_for(run.run(probe), READY_SECONDS)
            except Exception:  # any failure means "not ready", said plainly
                return json_response({"status": "unavailable",
                                      "reason": "the store did not answer"}, 503)
            return json_response({"status": "ready"})

        @app.get("/metrics", tags=["operations"], summary="Prometheus metrics (no credential)",
                 response_class=Response, openapi_extra=_PUBLIC,
                 responses={200: {"description": "the Prometheus text exposition format",
                                  "content": {"text/plain": {"schema": {"type": "string"}}}}})
        async def metrics_route() -> Response:
            body, media = metrics.exposition()
            return Response(body, media_type=media, headers={"cache-control": "no-store"})

        app.add_middleware(Telemetry, metrics=metrics, routes=lambda: app.router.routes)


__all__ = ["Observability"]
