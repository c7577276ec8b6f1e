"""The ASGI application of the memory service: the UHP Memories chapter over HTTP.

:func:`create_app` wires a :class:`~palimpsest.service.memories.MemoryService` to FastAPI. The
app is a thin shell (ARCHITECTURE.md §2): a route parses its body with a pydantic model from
:mod:`palimpsest.api.wire`, calls one facade method with the authenticated caller, and encodes
the wire dict it gets back. Every rule — privileges, the cutoff, validation of meaning, history —
is the service's.

Every facade call runs on one dedicated worker thread (:class:`~.runtime.Runner`), so the event
loop never blocks on SQLite and the store sees one caller at a time. The guard (:mod:`.guard`)
runs before any route; errors of every kind leave as the shared envelope (:mod:`.errors`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import AsyncIterator, Iterable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Route

from palimpsest.api import (
    apidocs,
    errors,
    memory_git,
    routes_memories,
    routes_ops,
    routes_provenance,
    routes_records,
    validation,
)
from palimpsest.api.fastpath import remember_fast_path
from palimpsest.api.guard import Guard, GuardConfig
from palimpsest.api.mcp_mount import mount_mcp
from palimpsest.api.runtime import UHP_VERSION, Runner, error_response
from palimpsest.api.schemas import SCHEMAS
from palimpsest.api.telemetry import Observability
from palimpsest.errors import PalError
from palimpsest.service.memories import MemoryService
from palimpsest.service.model import Caller
from palimpsest.text import safe_line
from palimpsest.ui import create_desk


@dataclass(frozen=True, slots=True)
class ApiConfig:
    """Configuration of the HTTP face (caps and the Host allowlist live in ``guard``)."""

    guard: GuardConfig = field(default_factory=GuardConfig)
    title: str = "Palimpsest memory service"
    # remember answered without FastAPI's machinery (api/fastpath.py); same bytes either way
    fast_paths: bool = True
    # which worker process of `pal serve --workers N` this is (0: the first or only one);
    # /metrics names it, since each worker counts only what it answered
    worker: int = 0


def create_app(svc: MemoryService, config: ApiConfig | None = None) -> FastAPI:
    """Build the ASGI app over ``svc``; the caller keeps ownership of ``svc`` (closes it)."""
    config = config or ApiConfig()
    observe = Observability(worker=config.worker)  # health, readiness, metrics, logs, traces
    run = Runner(on_group=observe.group_committed)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        run.shutdown()

    app = FastAPI(
        title=config.title,
        version=UHP_VERSION,
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url="/openapi.json",
    )
    app.state.service = svc
    app.state.runner = run

    async def authenticate(token: str) -> Caller:
        # A credential seen before, with nothing about principals changed since, needs no
        # trip to the service thread (one read of the stored generation).
        cached = svc.cached_caller(token)
        observe.credential_checked(cached=cached is not None)
        if cached is not None:
            return cached
        return await run.run(svc.authenticate, token)

    app.add_middleware(Guard, config=config.guard, authenticate=authenticate,
                       fast=remember_fast_path(svc, run) if config.fast_paths else None)
    _install_error_handlers(app)
    for module in (routes_memories, routes_records, routes_ops, routes_provenance):
        app.include_router(module.router)
    memory_git.install(app, svc)  # Memory Git + Lethe-compatible /api/memory routes
    # The review desk: cookie sessions instead of bearer headers (the guard's session_prefix),
    # the same service, Memory Git flow and service thread as every route.
    app.mount(config.guard.session_prefix, create_desk(svc, app.state.memory_git, run.run))
    mount_mcp(app, config.guard.allowed_hosts)  # MCP tools over streamable HTTP at /mcp
    apidocs.install(app)  # /docs, rendering /openapi.json
    observe.install(app, svc, run)  # last: its middleware wraps every other one
    app.openapi = functools.partial(_openapi, app)  # type: ignore[method-assign]
    return app


def _install_error_handlers(app: FastAPI) -> None:
    async def pal_error(request: Request, exc: Exception) -> Response:
        if not isinstance(exc, PalError):
            raise exc
        if errors.is_memory_git(request.url.path):
            return memory_git.lethe_error(exc)
        return error_response(errors.from_pal_error(exc))

    async def validation_error(request: Request, exc: Exception) -> Response:
        if not isinstance(exc, RequestValidationError):
            raise exc
        return error_response(_validation_error(exc), request.url.path)

    async def http_error(request: Request, exc: Exception) -> Response:
        if not isinstance(exc, StarletteHTTPException):
            raise exc
        path = request.url.path
        if exc.status_code == 404:
            return error_response(errors.ApiError("x.pal.route_not_found", "no such route"), path)
        if exc.status_code == 405:
            allowed = _allowed_methods(request)
            response = error_response(errors.ApiError(
                "x.pal.method_not_allowed",
                f"this route does not take {safe_line(request.method)[:20]}; it takes "
                f"{', '.join(allowed)}"
                if allowed else "this route does not take that method"), path)
            response.headers["allow"] = ", ".join(allowed)
            return response
        if exc.status_code == 413:
            return error_response(
                errors.ApiError("x.pal.request_too_large", "request too large"), path
            )
        return error_response(errors.ApiError("memory_invalid", "the request is malformed"), path)

    async def server_error(request: Request, exc: Exception) -> Response:
        # Never echo internals; the server log has the traceback.
        return error_response(errors.ApiError("x.pal.internal", "internal error"), request.url.path)

    app.add_exception_handler(PalError, pal_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(Exception, server_error)


def _allowed_methods(request: Request) -> list[str]:
    """Every method some route takes at this path (RFC 9110: a 405 carries ``Allow``); the
    router asks only the first route that matched, which knows its own methods only."""
    path = request.url.path
    return sorted({m for regex, methods in _route_table(request.app.router.routes)
                   if regex.match(path) for m in methods})


def _route_table(routes: Iterable[Any]) -> Iterator[tuple[re.Pattern[str], set[str]]]:
    for route in routes:
        # FastAPI keeps an included router's routes behind one entry, as route contexts
        contexts = getattr(route, "effective_route_contexts", None)
        if callable(contexts):
            for context in contexts():
                yield context.path_regex, set(context.methods or ())
        elif isinstance(route, Route) and route.methods:
            yield route.path_regex, set(route.methods)


def _validation_error(exc: RequestValidationError) -> errors.ApiError:
    # In the project's words, with the client's field path (api/validation.py).
    return validation.shape(list(exc.errors()))


_ERROR_STATUSES = ("401", "403", "404", "409", "413", "415", "421", "422", "503")


def _openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's document, corrected: the error envelope instead of FastAPI's validation
    schema, bearer security on every operation, and the response schemas of the chapter."""
    if app.openapi_schema:
        return app.openapi_schema
    doc = get_openapi(
        title=app.title,
        version=app.version,
        routes=app.routes,
        description=(
            "UHP Memories (protocol 2026-10-04) over HTTP. Every route needs "
            "'Authorization: Bearer <credential>' except the operations routes (/healthz, "
            "/readyz, /metrics), this document and its page /docs. Errors use the shared "
            "envelope."
        ),
    )
    components = doc.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)
    clash = set(schemas) & set(SCHEMAS)
    if clash:  # a response schema must never replace a request model's schema
        raise RuntimeError(f"OpenAPI schema names used twice: {sorted(clash)}")
    schemas.update(SCHEMAS)
    schemas["Error"] = errors.error_schema()
    components["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
    doc["security"] = [{"bearer": []}]
    error_ref = {"$ref": "#/components/schemas/Error"}
    for path, path_item in doc.get("paths", {}).items():
        if not path.startswith("/v1/"):
            continue  # routes mounted by other faces document their own error bodies
        for operation in path_item.values():
            responses = operation.setdefault("responses", {})
            for status in _ERROR_STATUSES:
                responses[status] = {
                    "description": "error envelope",
                    "content": {"application/json": {"schema": error_ref}},
                }
    app.openapi_schema = doc
    return doc


__all__ = ["ApiConfig", "create_app"]
