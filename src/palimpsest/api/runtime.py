"""What every route shares: the service runner, the authenticated caller, JSON responses.

Every facade call runs on one dedicated worker thread (:class:`Runner`), so the event loop never
blocks on SQLite and the store sees one caller at a time.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar

from fastapi import FastAPI, Request
from fastapi.responses import Response

from palimpsest import canonical
from palimpsest.api import errors
from palimpsest.api.guard import PRINCIPAL_KEY
from palimpsest.errors import PalError
from palimpsest.service.memories import MemoryService
from palimpsest.service.model import Caller

P = ParamSpec("P")
T = TypeVar("T")

UHP_VERSION = "2026-10-04"


class Runner:
    """Runs facade calls on one worker thread, one at a time, off the event loop."""

    def __init__(self) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pal-service")

    async def run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Await ``fn(*args, **kwargs)`` on the service thread."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(fn, *args, **kwargs))

    def shutdown(self) -> None:
        """Finish queued calls and stop the thread."""
        self._executor.shutdown(wait=True)


def caller_of(request: Request) -> Caller:
    """The authenticated caller the guard placed on the request."""
    caller = request.scope.get(PRINCIPAL_KEY)
    if not isinstance(caller, Caller):  # the guard always sets it; refuse rather than guess
        raise PalError("request reached a route without authentication", code="x.pal.internal")
    return caller


def json_response(body: Any, status: int = 200) -> Response:
    """Encode a wire dict as the response (canonical JSON, nosniff, not cacheable)."""
    return Response(
        content=canonical.encode(body),
        status_code=status,
        media_type="application/json",
        headers={"x-content-type-options": "nosniff", "cache-control": "no-store"},
    )


def error_response(error: errors.ApiError) -> Response:
    """Render one error envelope."""
    headers = {"www-authenticate": "Bearer"} if error.status == 401 else None
    response = json_response(error.body(), error.status)
    if headers:
        response.headers.update(headers)
    return response


def runner(app: FastAPI) -> Runner:
    """The app's service runner (for integrations mounted on the app)."""
    value = app.state.runner
    if not isinstance(value, Runner):
        raise TypeError("app was not built by create_app")
    return value


def service(app: FastAPI) -> MemoryService:
    """The app's memory service."""
    value = app.state.service
    if not isinstance(value, MemoryService):
        raise TypeError("app was not built by create_app")
    return value


__all__ = ["UHP_VERSION", "Runner", "caller_of", "error_response", "json_response", "runner",
           "service"]
