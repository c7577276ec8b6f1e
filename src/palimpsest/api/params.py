"""Path, query and header parameters shared by the routes, with their bounds.

Each bound is stated once here so a malformed parameter is refused (422 ``memory_invalid``)
before the service is called. Ids are opaque to the API: their syntax is the service's.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Header, Path, Query, Request

from palimpsest.api.runtime import Runner, caller_of, runner, service
from palimpsest.api.wire import TYPE_PATTERN
from palimpsest.service.memories import MemoryService
from palimpsest.service.model import Caller

MemoryId = Annotated[str, Path(min_length=1, max_length=200, description="A memory id")]
RecordId = Annotated[str, Path(min_length=1, max_length=200, description="A record id")]
ObjectId = Annotated[str, Path(min_length=1, max_length=200)]
QueryName = Annotated[str, Path(pattern=r"^[A-Za-z0-9_]{1,100}$")]
PartIndex = Annotated[int, Path(ge=0, le=1000, description="Index of a content part")]
Limit = Annotated[int, Query(ge=1, le=200, description="Page size (≤ 200)")]
# Cursors are the offsets and positions this server issues (service/ops/tree.py, records.py).
MemoryCursor = Annotated[str | None, Query(pattern=r"^[0-9]{1,9}$",
                                          description="next, from the previous page")]
Cursor = Annotated[str | None, Query(pattern=r"^[0-9]{1,18}$",
                                    description="next, from the previous page")]
AsOf = Annotated[
    str | None,
    Query(min_length=1, max_length=64, description="Read as it stood at this instant "
          "(RFC 3339, with a time zone)", json_schema_extra={"format": "date-time"}),
]
Include = Annotated[str, Query(
    pattern=r"^(?:active|all|provenance)(?:,(?:active|all|provenance))*$",
    description="active or all; add provenance (comma-separated) for a receipt on every "
                "record")]
Provenance = Annotated[str | None, Query(
    pattern=r"^provenance$", description="provenance: a receipt on every record")]
TypeFilter = Annotated[str | None, Query(pattern=TYPE_PATTERN, alias="type")]
IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        pattern=r"^[\x21-\x7e]{1,255}$",
        description="Replays of the same write under the same key return the first result",
    ),
]

# A write that cannot be retried safely without one (a reviewed write opens a proposal).
RequiredIdempotencyKey = Annotated[
    str,
    Header(
        alias="Idempotency-Key",
        pattern=r"^[\x21-\x7e]{1,255}$",
        description="Required: replays under the same key return the first result",
    ),
]


class Ctx:
    """What a route needs: the service, its runner and the authenticated caller."""

    __slots__ = ("caller", "run", "svc")

    def __init__(self, request: Request) -> None:
        self.svc: MemoryService = service(request.app)
        self.run: Runner = runner(request.app)
        self.caller: Caller = caller_of(request)


async def _context(request: Request) -> Ctx:
    # An async dependency: FastAPI would run a plain class in its thread pool (one more
    # thread hop per request for nothing).
    return Ctx(request)


Context = Annotated[Ctx, Depends(_context)]

__all__ = [
    "AsOf",
    "Context",
    "Ctx",
    "Cursor",
    "IdempotencyKey",
    "Include",
    "Limit",
    "MemoryCursor",
    "MemoryId",
    "ObjectId",
    "PartIndex",
    "Provenance",
    "QueryName",
    "RecordId",
    "RequiredIdempotencyKey",
    "TypeFilter",
]
