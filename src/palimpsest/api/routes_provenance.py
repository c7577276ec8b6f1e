"""Routes of provenance (docs/provenance.md): the server's published keys, members' own keys,
and a changeset's signatures — read, and the author's own added. Each route is one facade
call."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path
from fastapi.responses import Response

from palimpsest.api import wire
from palimpsest.api.params import Context, IdempotencyKey, MemoryId
from palimpsest.api.routes_memories import ok
from palimpsest.api.runtime import json_response

router = APIRouter()

ChangesetId = Annotated[str, Path(pattern=r"^[0-9a-f]{64}$", description="A changeset id")]
KeyId = Annotated[str, Path(pattern=r"^[0-9a-f]{64}$", description="A key's fingerprint")]


@router.get("/v1/provenance/keys", tags=["provenance"], responses=ok("ProvenanceKeys"),
            response_class=Response)
async def provenance_keys(ctx: Context) -> Response:
    """Every public key that signed for this server (active and retired): what `pal verify`
    checks signatures and receipts against, offline."""
    return json_response(await ctx.run.run(ctx.svc.provenance_keys))


@router.get("/v1/members/me/keys", tags=["provenance"], responses=ok("MemberKeyList"),
            response_class=Response)
async def list_keys(ctx: Context) -> Response:
    """The caller's registered public keys (revoked ones included)."""
    return json_response(await ctx.run.run(ctx.svc.list_keys, ctx.caller))


@router.post("/v1/members/me/keys", tags=["provenance"], responses=ok("MemberKey"),
             response_class=Response)
async def register_key(body: wire.KeyIn, ctx: Context,
                       idempotency_key: IdempotencyKey = None) -> Response:
    """Register a public key to sign your own changesets with (no weak key is accepted)."""
    return json_response(await ctx.run.run(ctx.svc.register_key, ctx.caller, wire.dump(body),
                                           idempotency_key=idempotency_key))


@router.delete("/v1/members/me/keys/{key_id}", tags=["provenance"], responses=ok("MemberKey"),
               response_class=Response)
async def revoke_key(key_id: KeyId, ctx: Context,
                     idempotency_key: IdempotencyKey = None) -> Response:
    """Stop one of your keys signing anything new (what it signed stays verifiable)."""
    return json_response(await ctx.run.run(ctx.svc.revoke_key, ctx.caller, key_id,
                                           idempotency_key=idempotency_key))


@router.get("/v1/memories/{memory_id}/changesets/{changeset_id}/signatures",
            tags=["provenance"], responses=ok("ChangesetSignatures"), response_class=Response)
async def changeset_signatures(memory_id: MemoryId, changeset_id: ChangesetId,
                               ctx: Context) -> Response:
    """A changeset's canonical bytes (base64: what its id digests and signatures sign) and
    every signature kept for it."""
    return json_response(await ctx.run.run(
        ctx.svc.changeset_signatures, ctx.caller, memory_id, changeset_id))


@router.post("/v1/memories/{memory_id}/changesets/{changeset_id}/signatures",
             tags=["provenance"], responses=ok("ChangesetSignatures"), response_class=Response)
async def sign_changeset(memory_id: MemoryId, changeset_id: ChangesetId, body: wire.SignIn,
                         ctx: Context, idempotency_key: IdempotencyKey = None) -> Response:
    """Add the author's own signature (checked against its registered key, kept beside the
    server's)."""
    return json_response(await ctx.run.run(
        ctx.svc.sign_changeset, ctx.caller, memory_id, changeset_id, wire.dump(body),
        idempotency_key=idempotency_key))
