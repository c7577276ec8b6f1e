"""Routes that read across records: recall, graph, prime, named and free queries, type
operations, snapshots and consolidations (uhp-memories.md §6.2, §7, §8, §10)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Query
from fastapi.responses import Response

from palimpsest.api import wire
from palimpsest.api.params import (
    Context,
    IdempotencyKey,
    MemoryId,
    ObjectId,
    Provenance,
    QueryName,
    RecordId,
)
from palimpsest.api.routes_memories import ok
from palimpsest.api.runtime import json_response

router = APIRouter()


@router.post("/v1/memories/{memory_id}/recall", tags=["recall"], responses=ok("RecallResult"),
             response_class=Response)
async def recall(memory_id: MemoryId, body: wire.Recall, ctx: Context) -> Response:
    """Ask this memory and every readable descendant (down, never up)."""
    return json_response(await ctx.run.run(ctx.svc.recall, ctx.caller, memory_id,
                                           wire.dump(body)))


@router.post("/v1/memories/{memory_id}/graph", tags=["recall"], responses=ok("GraphResult"),
             response_class=Response)
async def graph(memory_id: MemoryId, body: wire.Graph, ctx: Context) -> Response:
    """Records and the references between them; edges into unreadable memories are marked
    ``available: false`` and name nothing behind them."""
    return json_response(await ctx.run.run(ctx.svc.graph, ctx.caller, memory_id,
                                           wire.dump(body)))


@router.get("/v1/memories/{memory_id}/prime", tags=["recall"], responses=ok("Prime"),
            response_class=Response)
async def prime(
    memory_id: MemoryId,
    ctx: Context,
    budget: Annotated[int, Query(ge=1, le=1_000_000, description="Token budget")] = 4000,
    include: Provenance = None,
    provenance: Annotated[str | None, Query(
        min_length=1, max_length=400, description="a provenance filter: any, or "
        "reviewed_by_other,written_by:human|agent,signed_by:<key>,unreviewed_agents:false"
    )] = None,
) -> Response:
    """Standing records (active, ``attributes.standing`` true) within a token budget — a
    project extension the requirements add to the chapter (uhp-memories.md §10). In a memory
    that requires review an agent's unreviewed write is left out unless ``provenance=any``."""
    return json_response(await ctx.run.run(ctx.svc.prime, ctx.caller, memory_id, budget,
                                           include=include, provenance=provenance))


@router.get("/v1/memories/{memory_id}/queries", tags=["queries"], responses=ok("QueryList"),
            response_class=Response)
async def list_queries(memory_id: MemoryId, ctx: Context) -> Response:
    """Named queries defined on this memory."""
    return json_response(await ctx.run.run(ctx.svc.list_queries, ctx.caller, memory_id))


@router.put("/v1/memories/{memory_id}/queries/{name}", tags=["queries"], responses=ok("Query"),
            response_class=Response)
async def put_query(memory_id: MemoryId, name: QueryName, body: wire.QueryDefine, ctx: Context,
                    idempotency_key: IdempotencyKey = None) -> Response:
    """Define (or redefine) a named query."""
    return json_response(await ctx.run.run(
        ctx.svc.put_query, ctx.caller, memory_id, name, wire.dump(body),
        idempotency_key=idempotency_key))


@router.post("/v1/memories/{memory_id}/queries/{name}", tags=["queries"],
             responses=ok("RecallResult"), response_class=Response)
async def run_query(memory_id: MemoryId, name: QueryName, body: wire.QueryRun,
                    ctx: Context) -> Response:
    """Run a named query with its parameters."""
    return json_response(await ctx.run.run(
        ctx.svc.run_query, ctx.caller, memory_id, name, wire.dump(body)))


@router.post("/v1/memories/{memory_id}/query", tags=["queries"], responses=ok("RecallResult"),
             response_class=Response)
async def free_query(memory_id: MemoryId, body: wire.FreeQuery, ctx: Context) -> Response:
    """A free query in a language the provider declares (the built-in provider declares none:
    ``memory_unsupported``)."""
    return json_response(await ctx.run.run(ctx.svc.free_query, ctx.caller, memory_id,
                                           wire.dump(body)))


@router.post("/v1/memories/{memory_id}/records/{record_id}/operations/{name}",
             tags=["queries"], responses=ok("Operation"), response_class=Response)
async def operate(
    memory_id: MemoryId,
    record_id: RecordId,
    name: QueryName,
    ctx: Context,
    body: Annotated[dict[str, Any], Body(max_length=100)],
) -> Response:
    """Run an operation a record's type declares."""
    return json_response(await ctx.run.run(
        ctx.svc.operate, ctx.caller, memory_id, record_id, name, body))


@router.post("/v1/memories/{memory_id}/snapshots", tags=["snapshots"], responses=ok("Snapshot"),
             response_class=Response)
async def create_snapshot(memory_id: MemoryId, body: wire.SnapshotCreate, ctx: Context,
                          idempotency_key: IdempotencyKey = None) -> Response:
    """Name the current instant of the memory (copies nothing)."""
    return json_response(await ctx.run.run(
        ctx.svc.create_snapshot, ctx.caller, memory_id, wire.dump(body),
        idempotency_key=idempotency_key))


@router.get("/v1/memories/{memory_id}/snapshots", tags=["snapshots"],
            responses=ok("SnapshotList"), response_class=Response)
async def list_snapshots(memory_id: MemoryId, ctx: Context) -> Response:
    """Snapshots, newest first."""
    return json_response(await ctx.run.run(ctx.svc.list_snapshots, ctx.caller, memory_id))


@router.post("/v1/memories/{memory_id}/consolidations", tags=["consolidations"],
             responses=ok("Consolidation"), response_class=Response)
async def consolidate(memory_id: MemoryId, body: wire.Consolidate, ctx: Context,
                      idempotency_key: IdempotencyKey = None) -> Response:
    """Run the provider's deterministic consolidator on this memory."""
    return json_response(await ctx.run.run(
        ctx.svc.consolidate, ctx.caller, memory_id, wire.dump(body),
        idempotency_key=idempotency_key))


@router.get("/v1/memories/{memory_id}/consolidations", tags=["consolidations"],
            responses=ok("ConsolidationList"), response_class=Response)
async def list_consolidations(memory_id: MemoryId, ctx: Context) -> Response:
    """Consolidation runs, newest first."""
    return json_response(await ctx.run.run(ctx.svc.list_consolidations, ctx.caller, memory_id))


@router.get("/v1/memories/{memory_id}/consolidations/{run_id}", tags=["consolidations"],
            responses=ok("Consolidation"), response_class=Response)
async def get_consolidation(memory_id: MemoryId, run_id: ObjectId, ctx: Context) -> Response:
    """One consolidation run."""
    return json_response(await ctx.run.run(
        ctx.svc.get_consolidation, ctx.caller, memory_id, run_id))


@router.get("/v1/memories/{memory_id}/consolidations/{run_id}/changes",
            tags=["consolidations"], responses=ok("ConsolidationChanges"),
            response_class=Response)
async def consolidation_changes(memory_id: MemoryId, run_id: ObjectId,
                                ctx: Context) -> Response:
    """What a run created, superseded and forgot."""
    return json_response(await ctx.run.run(
        ctx.svc.consolidation_changes, ctx.caller, memory_id, run_id))


@router.post("/v1/memories/{memory_id}/consolidations/{run_id}/revert",
             tags=["consolidations"], responses=ok("Consolidation"), response_class=Response)
async def revert_consolidation(memory_id: MemoryId, run_id: ObjectId, ctx: Context,
                               idempotency_key: IdempotencyKey = None) -> Response:
    """Undo a run by appending new versions (needs ``delete``)."""
    return json_response(await ctx.run.run(
        ctx.svc.revert_consolidation, ctx.caller, memory_id, run_id,
        idempotency_key=idempotency_key))
