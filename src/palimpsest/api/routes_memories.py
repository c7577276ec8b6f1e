"""Routes of the tree: discovery, providers, types, memories, grants, harness settings
(uhp-memories.md §2, §3, §4, §6.1, §6.3, §12). Each route is one facade call."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.responses import Response

from palimpsest.api import wire
from palimpsest.api.params import (
    Context,
    IdempotencyKey,
    Limit,
    MemoryCursor,
    MemoryId,
    ObjectId,
)
from palimpsest.api.runtime import UHP_VERSION, json_response
from palimpsest.api.schemas import ref

router = APIRouter()


def ok(name: str, description: str = "OK") -> dict[int | str, dict[str, Any]]:
    """The documented 200 response with schema ``name``."""
    return {200: {"description": description,
                  "content": {"application/json": {"schema": ref(name)}}}}


@router.get("/v1/uhp", tags=["discovery"], responses=ok("Discovery"), response_class=Response)
async def discovery(ctx: Context) -> Response:
    """Which protocol version and capabilities this server offers."""
    return json_response({
        "object": "uhp",
        "version": UHP_VERSION,
        "versions": [UHP_VERSION],
        "capabilities": {"memories": True},
        "extensions": {"memories": {"prime_route": True, "files": True}},
    })


@router.get("/v1/memories/providers", tags=["providers"], responses=ok("Providers"),
            response_class=Response)
async def providers(ctx: Context) -> Response:
    """Capability documents of the connected providers (§12)."""
    return json_response(await ctx.run.run(ctx.svc.providers, ctx.caller))


@router.get("/v1/memories/types", tags=["types"], responses=ok("Types"),
            response_class=Response)
async def types(ctx: Context) -> Response:
    """Core record types and the kinds this server adds."""
    return json_response(await ctx.run.run(ctx.svc.types, ctx.caller))


@router.post("/v1/memories", tags=["memories"], responses=ok("Memory"), response_class=Response)
async def create_memory(body: wire.MemoryCreate, ctx: Context,
                        idempotency_key: IdempotencyKey = None) -> Response:
    """Create a memory (a root, or a child: needs ``create`` on the parent)."""
    return json_response(await ctx.run.run(
        ctx.svc.create_memory, ctx.caller, wire.dump(body), idempotency_key=idempotency_key))


@router.get("/v1/memories", tags=["memories"], responses=ok("MemoryList"),
            response_class=Response)
async def list_memories(
    ctx: Context,
    *,
    parent: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
    ancestor: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
    granted: Annotated[bool, Query()] = False,
    limit: Limit = 50,
    cursor: MemoryCursor = None,
) -> Response:
    """One level of the tree: entry points, ``?parent=``, ``?ancestor=`` or ``?granted=true``."""
    return json_response(await ctx.run.run(
        ctx.svc.list_memories, ctx.caller, parent=parent, ancestor=ancestor, granted=granted,
        limit=limit, cursor=cursor))


@router.get("/v1/memories/{memory_id}", tags=["memories"], responses=ok("Memory"),
            response_class=Response)
async def get_memory(memory_id: MemoryId, ctx: Context) -> Response:
    """One memory, with the caller's privileges and counts."""
    return json_response(await ctx.run.run(ctx.svc.get_memory, ctx.caller, memory_id))


@router.put("/v1/memories/{memory_id}", tags=["memories"], responses=ok("Memory"),
            response_class=Response)
async def update_memory(memory_id: MemoryId, body: wire.MemoryUpdate, ctx: Context,
                        idempotency_key: IdempotencyKey = None) -> Response:
    """Rename, describe, restrict or move (``parent_id``) a memory."""
    return json_response(await ctx.run.run(
        ctx.svc.update_memory, ctx.caller, memory_id, wire.dump(body),
        idempotency_key=idempotency_key))


@router.delete("/v1/memories/{memory_id}", tags=["memories"], responses=ok("MemoryDeleted"),
               response_class=Response)
async def delete_memory(memory_id: MemoryId, ctx: Context,
                        idempotency_key: IdempotencyKey = None) -> Response:
    """Delete a memory with its records and every descendant (needs ``delete``)."""
    return json_response(await ctx.run.run(
        ctx.svc.delete_memory, ctx.caller, memory_id, idempotency_key=idempotency_key))


@router.get("/v1/memories/{memory_id}/grants", tags=["grants"], responses=ok("GrantList"),
            response_class=Response)
async def list_grants(memory_id: MemoryId, ctx: Context) -> Response:
    """Grants on the memory and those it inherits (down to the cutoff)."""
    return json_response(await ctx.run.run(ctx.svc.list_grants, ctx.caller, memory_id))


@router.post("/v1/memories/{memory_id}/grants", tags=["grants"], responses=ok("Grant"),
             response_class=Response)
async def put_grant(memory_id: MemoryId, body: wire.GrantPut, ctx: Context,
                    idempotency_key: IdempotencyKey = None) -> Response:
    """Grant a principal privileges here (replaces its previous grant on this node)."""
    return json_response(await ctx.run.run(
        ctx.svc.put_grant, ctx.caller, memory_id, wire.dump(body),
        idempotency_key=idempotency_key))


@router.delete("/v1/memories/{memory_id}/grants/{grant_id}", tags=["grants"],
               responses=ok("GrantDeleted"), response_class=Response)
async def delete_grant(memory_id: MemoryId, grant_id: ObjectId, ctx: Context,
                       idempotency_key: IdempotencyKey = None) -> Response:
    """Remove one grant (needs ``delete``)."""
    return json_response(await ctx.run.run(
        ctx.svc.delete_grant, ctx.caller, memory_id, grant_id, idempotency_key=idempotency_key))


@router.get("/v1/harnesses/{harness_id}/memories", tags=["harness"],
            responses=ok("HarnessMemories"), response_class=Response)
async def harness_memories(harness_id: ObjectId, ctx: Context) -> Response:
    """The memories a harness's agent was granted, highest in the tree first."""
    return json_response(await ctx.run.run(ctx.svc.harness_memories, ctx.caller, harness_id))


@router.put("/v1/harnesses/{harness_id}/memories", tags=["harness"],
            responses=ok("HarnessMemories"), response_class=Response)
async def set_harness_memories(harness_id: ObjectId, body: wire.HarnessMemoriesPut,
                               ctx: Context,
                               idempotency_key: IdempotencyKey = None) -> Response:
    """Set the harness's default memory (must be writable by its agent) and ``observe``."""
    return json_response(await ctx.run.run(
        ctx.svc.set_harness_memories, ctx.caller, harness_id, wire.dump(body),
        idempotency_key=idempotency_key))
