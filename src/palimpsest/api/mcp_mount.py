"""Mount the MCP endpoint at ``/mcp`` on the API app built by ``palimpsest.api.app``.

The route sits behind the API guard, so a request reaching it has passed the Host/Origin
allowlist and carries an authenticated caller in the ASGI scope; facade calls go through the
app's one service thread. The SDK's session manager is started inside the app's lifespan.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI
from starlette.routing import Route

from palimpsest.api import runtime
from palimpsest.api.guard import CREDENTIAL_KEY, PRINCIPAL_KEY
from palimpsest.errors import Forbidden
from palimpsest.mcp.server import chain_lifespan, http_endpoint
from palimpsest.service.memorygit.flow import ReviewFlow
from palimpsest.service.model import Caller

MCP_PATH = "/mcp"


def _resolve(ctx: Any) -> Caller:
    scope = getattr(getattr(ctx, "request", None), "scope", None)
    caller = scope.get(PRINCIPAL_KEY) if isinstance(scope, dict) else None
    if not isinstance(caller, Caller):  # the guard always sets it; never guess a caller
        raise Forbidden("no authenticated caller on this request", code="invalid_credential")
    return caller


def _origin(ctx: Any) -> tuple[str | None, str | None]:
    scope = getattr(getattr(ctx, "request", None), "scope", None)
    if not isinstance(scope, dict):
        return None, None
    credential = scope.get(CREDENTIAL_KEY)
    request = (scope.get("state") or {}).get("request_id")
    return (credential if isinstance(credential, str) else None,
            request if isinstance(request, str) else None)


def mount_mcp(app: FastAPI, allowed_hosts: tuple[str, ...]) -> None:
    """Add the streamable-HTTP MCP endpoint at ``/mcp`` (stateless, JSON responses); the
    Memory Git tools are offered when the app carries Memory Git (``app.state.memory_git``)."""
    service = runtime.service(app)
    run = runtime.runner(app)
    flow = getattr(app.state, "memory_git", None)

    async def invoke(fn: Callable[[], Any]) -> Any:
        return await run.run(fn)

    endpoint, lifespan = http_endpoint(service, _resolve, invoke, allowed_hosts=allowed_hosts,
                                       flow=flow if isinstance(flow, ReviewFlow) else None,
                                       origin=_origin, limiter=getattr(app.state, "limiter",
                                                                       None))
    app.router.routes.append(Route(MCP_PATH, endpoint=endpoint, methods=["GET", "POST", "DELETE"]))
    app.router.lifespan_context = chain_lifespan(app.router.lifespan_context, lifespan)
