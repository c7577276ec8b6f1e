"""The HTTP face's part of the audit log (:mod:`palimpsest.service.audit`).

The outermost middleware (:mod:`.middleware`) asks :func:`outcome` whether a request is audited
— every write (``POST``, ``PUT``, ``PATCH``, ``DELETE``) and every refusal (any 4xx, reads
included) — and, before the last byte of such an answer leaves, hands :class:`AuditSink` an
entry built from the route template, the path's memory id, the caller, the credential id the
guard read, the status, the refusal's code (read from our own error envelope) and the request
id. No body, query string or record text goes into it.

The answer waits for its entry to be stored, so an acknowledged write is always audited;
entries of concurrent requests are stored together in one transaction on the service thread
(a flood of refusals costs one small write per batch, not one per request). When the store
cannot take the entry, the answer still goes out and the failure is logged: auditing never
turns an acknowledged write into an error.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any, Final

from palimpsest.api.runtime import Runner
from palimpsest.errors import PalError
from palimpsest.service.memories import MemoryService
from palimpsest.service.model import AuditEntry

LOG: Final = logging.getLogger("palimpsest.audit")
WRITE_METHODS: Final = frozenset({"POST", "PUT", "PATCH", "DELETE"})
MAX_ERROR_BODY: Final = 64 * 1024  # our error envelopes are small; a larger body is not one
MEMORY_PARAMS: Final = ("memory_id", "project")  # the UHP routes' and Memory Git's names
# POST routes that only read (a body carries the question): answered, they are not audited
PRUNE_EVERY_SECONDS: Final = 3600.0
READ_ROUTES: Final = frozenset({
    "POST /v1/memories/{memory_id}/recall", "POST /v1/memories/{memory_id}/graph",
    "POST /v1/memories/{memory_id}/queries/{name}", "POST /v1/memories/{memory_id}/query",
    "POST /api/memory/changesets/{changeset_id}/diff", "POST /api/memory/{project}/context",
    "POST /api/memory/{project}/conflicts/detect",
})


def outcome(method: str, status: int, route: str, *, tools_audit_themselves: bool) -> str | None:
    """``ok``, ``refused``, ``failed`` or ``None`` (not audited: a read that was answered —
    ``GET`` or one of :data:`READ_ROUTES` — or a call of the MCP endpoint whose tools write
    their own entries)."""
    if 400 <= status < 500:
        return "refused"
    if tools_audit_themselves or method not in WRITE_METHODS or f"{method} {route}" in READ_ROUTES:
        return None
    return "ok" if status < 400 else "failed"


def reason(status: int, body: bytes) -> str | None:
    """The code of our error envelope (``{"error": {"code"}}`` or Memory Git's
    ``{"error": "<code>"}``), or ``None``."""
    if status < 400 or not body or len(body) > MAX_ERROR_BODY:
        return None
    try:
        doc = json.loads(body)
    except ValueError:
        return None
    error = doc.get("error") if isinstance(doc, dict) else None
    code = error.get("code") if isinstance(error, dict) else error
    return code[:100] if isinstance(code, str) else None


def memory_of(params: dict[str, Any]) -> str | None:
    """The memory a route's path names, if any."""
    for name in MEMORY_PARAMS:
        value = params.get(name)
        if isinstance(value, str):
            return value
    return None


class AuditSink:
    """Stores entries on the service thread, batching those of concurrent requests."""

    def __init__(self, svc: MemoryService, run: Runner, *, retention_days: int = 0) -> None:
        self.svc = svc
        self.run = run
        self.retention_days = retention_days  # 0: keep every entry
        self._pruned_at: float | None = None
        self._pending: list[tuple[AuditEntry, asyncio.Future[None]]] = []
        self._drain: asyncio.Task[None] | None = None

    async def record(self, entry: AuditEntry) -> None:
        """Queue ``entry`` and wait until it is stored (or its batch failed and was logged)."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.append((entry, done))
        if self._drain is None or self._drain.done():
            self._drain = asyncio.ensure_future(self._store_pending())
        await asyncio.shield(done)

    async def _store_pending(self) -> None:
        # Prune first: once the loop below finds nothing pending this task ends without
        # yielding again, so an entry queued meanwhile always starts a new drain.
        await self._prune_hourly()
        while self._pending:
            batch, self._pending = self._pending, []
            try:
                await self.run.run(self.svc.append_audit, [entry for entry, _ in batch])
            except PalError as exc:  # the store is unavailable: the answers still go out
                LOG.error("could not store %d audit entries: %s", len(batch), exc.message)
            for _, done in batch:
                if not done.done():
                    done.set_result(None)

    async def _prune_hourly(self) -> None:
        """The retention setting: entries older than it go, checked at most once an hour."""
        now = time.monotonic()
        if not self.retention_days or (self._pruned_at is not None
                                       and now - self._pruned_at < PRUNE_EVERY_SECONDS):
            return
        self._pruned_at = now
        try:
            await self.run.run(self.svc.prune_audit, self.retention_days)
        except PalError as exc:
            LOG.error("could not prune the audit log: %s", exc.message)


__all__ = ["AuditSink", "memory_of", "outcome", "reason"]
