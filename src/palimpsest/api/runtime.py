"""What every route shares: the service runner, the authenticated caller, JSON responses.

Every facade call runs on one dedicated worker thread (:class:`Runner`), so the event loop never
blocks on SQLite and the store sees one caller at a time; concurrent ``remember`` calls are
committed together (group commit), each still its own changeset and answered once durable.
"""

from __future__ import annotations

import asyncio
import functools
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, Final, ParamSpec, TypeVar

from fastapi import FastAPI, Request
from fastapi.responses import Response

from palimpsest import canonical
from palimpsest.api import errors
from palimpsest.api.guard import PRINCIPAL_KEY
from palimpsest.errors import PalError
from palimpsest.service.grouped import RememberCall
from palimpsest.service.memories import MemoryService
from palimpsest.service.model import Caller, Wire

P = ParamSpec("P")
T = TypeVar("T")

UHP_VERSION = "2026-10-04"


_STOP: Final = object()
MAX_GROUP: Final = 32  # remembers committed together at most (bounds one transaction's work)


class _Job:
    __slots__ = ("call", "fn", "future", "svc")

    def __init__(self, future: Future[Any], fn: Callable[[], Any] | None,
                 svc: MemoryService | None = None, call: RememberCall | None = None) -> None:
        self.future = future
        self.fn = fn
        self.svc = svc
        self.call = call


class Runner:
    """Runs facade calls on one worker thread, one at a time, off the event loop.

    ``remember`` calls that queue up while the thread is busy are handed to the service
    together (:meth:`MemoryService.remember_many`: group commit, each write still its own
    changeset and outcome, answered only once durable); everything else runs alone.
    """

    def __init__(self, on_group: Callable[[int], None] | None = None) -> None:
        self._on_group = on_group  # told the size of each group commit (metrics)
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._work, name="pal-service", daemon=True)
        self._started = False
        self._start_lock = threading.Lock()

    async def run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Await ``fn(*args, **kwargs)`` on the service thread."""
        result: T = await self._submit(_Job(Future(), functools.partial(fn, *args, **kwargs)))
        return result

    async def remember(self, svc: MemoryService, caller: Caller, memory_id: str, body: Wire,
                       idempotency_key: str | None) -> Wire:
        """Await ``svc.remember(...)`` on the service thread, grouped with concurrent ones."""
        job = _Job(Future(), None, svc, RememberCall(caller, memory_id, body, idempotency_key))
        result: Wire = await self._submit(job)
        return result

    async def _submit(self, job: _Job) -> Any:
        if not self._started:
            with self._start_lock:
                if not self._started:
                    self._thread.start()
                    self._started = True
        self._queue.put(job)
        return await asyncio.wrap_future(job.future)

    def shutdown(self) -> None:
        """Finish queued calls and stop the thread."""
        with self._start_lock:
            if self._started:
                self._queue.put(_STOP)
                self._thread.join()
                self._started = False
                self._thread = threading.Thread(target=self._work, name="pal-service",
                                                daemon=True)

    def _work(self) -> None:
        carry: Any = None
        while True:
            job = carry if carry is not None else self._queue.get()
            carry = None
            if job is _STOP:
                return
            if job.call is None:
                if job.future.set_running_or_notify_cancel():
                    try:
                        job.future.set_result(job.fn())
                    except BaseException as exc:  # the awaiting route raises it
                        job.future.set_exception(exc)
                continue
            group = [job] if job.future.set_running_or_notify_cancel() else []
            while len(group) < MAX_GROUP:
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is _STOP or nxt.call is None or nxt.svc is not job.svc:
                    carry = nxt
                    break
                if nxt.future.set_running_or_notify_cancel():
                    group.append(nxt)
            if group:
                if self._on_group is not None:
                    self._on_group(len(group))
                self._run_group(job.svc, group)

    @staticmethod
    def _run_group(svc: MemoryService, group: list[_Job]) -> None:
        try:
            outcomes = svc.remember_many([j.call for j in group if j.call is not None])
        except BaseException as exc:  # every waiting route learns of it
            for j in group:
                j.future.set_exception(exc)
            return
        for j, outcome in zip(group, outcomes, strict=True):
            if isinstance(outcome, Exception):
                j.future.set_exception(outcome)
            else:
                j.future.set_result(outcome)


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


def remember_response(doc: dict[str, Any]) -> Response:
    """A remember's answer: 200 with the record, or 202 when a reviewed memory turned an agent's
    write into a pending proposal (docs/memory-git.md)."""
    return json_response(doc, 202 if doc.get("object") == "memory.pending_review" else 200)


def error_response(error: errors.ApiError, path: str = "") -> Response:
    """Render one error for a request to ``path`` (each surface has its own face)."""
    status, body = error.on(path)
    response = json_response(body, status)
    response.headers.update(errors.headers_of(error))
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
