"""Routes of records: remember, list, get, history, content bytes, revise, forget, erase,
observe and jobs, and file upload (uhp-memories.md §5, §6.2). Each route is one facade call."""

from __future__ import annotations

import re
from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from palimpsest.api import wire
from palimpsest.api.params import (
    AsOf,
    Context,
    Cursor,
    IdempotencyKey,
    Include,
    Limit,
    MemoryId,
    ObjectId,
    PartIndex,
    Provenance,
    RecordId,
    TypeFilter,
)
from palimpsest.api.routes_memories import ok
from palimpsest.api.runtime import json_response, remember_response
from palimpsest.api.schemas import ref
from palimpsest.service.providers import KEPT_MEDIA

router = APIRouter()

# A media type as RFC 6838 restricts it; anything else is served as opaque bytes.
_RFC6838_NAME = r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}"
_MEDIA_TYPE = re.compile(f"{_RFC6838_NAME}/{_RFC6838_NAME}")
_FILENAME_FALLBACK = re.compile(r"[^A-Za-z0-9._-]")


@router.post("/v1/memories/{memory_id}/records", tags=["records"],
             responses={**ok("Record"), 202: {
                 "description": "the memory requires review: the write went to the caller's "
                                "own ref and a proposal was opened (Memory Git)",
                 "content": {"application/json": {"schema": ref("PendingReview")}}}},
             response_class=Response)
async def remember(memory_id: MemoryId, body: wire.Remember, ctx: Context,
                   idempotency_key: IdempotencyKey = None) -> Response:
    """State a record; ``written_by`` is stamped from the credential."""
    doc = await ctx.run.remember(ctx.svc, ctx.caller, memory_id, wire.dump(body),
                                 idempotency_key)
    return remember_response(doc)


@router.get("/v1/memories/{memory_id}/records", tags=["records"], responses=ok("RecordList"),
            response_class=Response)
async def list_records(memory_id: MemoryId, ctx: Context, *, type_: TypeFilter = None,
                       include: Include = "active", as_of: AsOf = None, limit: Limit = 50,
                       cursor: Cursor = None) -> Response:
    """Records of this memory only (never an ancestor's), newest first."""
    return json_response(await ctx.run.run(
        ctx.svc.list_records, ctx.caller, memory_id, type=type_, include=include, as_of=as_of,
        limit=limit, cursor=cursor))


@router.get("/v1/memories/{memory_id}/records/{record_id}", tags=["records"],
            responses=ok("Record"), response_class=Response)
async def get_record(memory_id: MemoryId, record_id: RecordId, ctx: Context,
                     as_of: AsOf = None, include: Provenance = None) -> Response:
    """One record of this memory (another memory's record is not found here)."""
    return json_response(await ctx.run.run(
        ctx.svc.get_record, ctx.caller, memory_id, record_id, as_of=as_of, include=include))


@router.get("/v1/memories/{memory_id}/records/{record_id}/history", tags=["records"],
            responses=ok("RecordList"), response_class=Response)
async def record_history(memory_id: MemoryId, record_id: RecordId, ctx: Context) -> Response:
    """Every version of a record, oldest first."""
    return json_response(await ctx.run.run(
        ctx.svc.record_history, ctx.caller, memory_id, record_id))


@router.get(
    "/v1/memories/{memory_id}/records/{record_id}/content/{index}",
    tags=["records"],
    response_class=Response,
    responses={200: {"description": "The part's bytes, exactly as uploaded",
                     "content": {"application/octet-stream": {
                         "schema": {"type": "string", "format": "binary"}}}}},
)
async def record_content(memory_id: MemoryId, record_id: RecordId, index: PartIndex,
                         ctx: Context) -> Response:
    """A file part's bytes, served as an attachment that a browser never sniffs or renders."""
    data = await ctx.run.run(ctx.svc.record_content, ctx.caller, memory_id, record_id, index)
    media_type = data.media_type if _MEDIA_TYPE.fullmatch(data.media_type) else (
        "application/octet-stream")
    fallback = _FILENAME_FALLBACK.sub("_", data.name)[:100] or "file"
    disposition = f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(data.name)}"
    return Response(
        content=data.data,
        media_type=media_type,
        headers={
            "content-disposition": disposition,
            "x-content-type-options": "nosniff",
            "content-security-policy": "default-src 'none'; sandbox",
            "cache-control": "no-store",
        },
    )


@router.patch("/v1/memories/{memory_id}/records/{record_id}", tags=["records"],
              responses=ok("Record"), response_class=Response)
async def revise(memory_id: MemoryId, record_id: RecordId, body: wire.Revise, ctx: Context,
                 idempotency_key: IdempotencyKey = None) -> Response:
    """Write a new version of a record; the previous one becomes ``superseded``."""
    return json_response(await ctx.run.run(
        ctx.svc.revise, ctx.caller, memory_id, record_id, wire.dump(body),
        idempotency_key=idempotency_key))


@router.delete("/v1/memories/{memory_id}/records/{record_id}", tags=["records"],
               responses=ok("Record"), response_class=Response)
async def forget(memory_id: MemoryId, record_id: RecordId, ctx: Context,
                 idempotency_key: IdempotencyKey = None) -> Response:
    """Mark a record forgotten; its history is kept."""
    return json_response(await ctx.run.run(
        ctx.svc.forget, ctx.caller, memory_id, record_id, idempotency_key=idempotency_key))


@router.post("/v1/memories/{memory_id}/erase", tags=["records"], responses=ok("Erasure"),
             response_class=Response)
async def erase(memory_id: MemoryId, body: wire.Erase, ctx: Context,
                idempotency_key: IdempotencyKey = None) -> Response:
    """Remove records' content bytes; ``unreachable`` names what could not be erased."""
    return json_response(await ctx.run.run(
        ctx.svc.erase, ctx.caller, memory_id, wire.dump(body), idempotency_key=idempotency_key))


@router.post("/v1/memories/{memory_id}/observe", tags=["records"],
             responses={**ok("Observed"), 202: {
                 "description": "derivation deferred: poll the job",
                 "content": {"application/json": {"schema": {
                     "$ref": "#/components/schemas/Observed"}}}}},
             response_class=Response)
async def observe(memory_id: MemoryId, body: wire.Observe, ctx: Context,
                  idempotency_key: IdempotencyKey = None) -> Response:
    """Send a turn's episodes to the memory."""
    result = await ctx.run.run(ctx.svc.observe, ctx.caller, memory_id, wire.dump(body),
                               idempotency_key=idempotency_key)
    job = result.get("job") if isinstance(result, dict) else None
    pending = isinstance(job, dict) and job.get("status") == "pending"
    return json_response(result, 202 if pending else 200)


@router.get("/v1/memories/{memory_id}/jobs/{job_id}", tags=["records"], responses=ok("Job"),
            response_class=Response)
async def get_job(memory_id: MemoryId, job_id: ObjectId, ctx: Context) -> Response:
    """The state of an observe job."""
    return json_response(await ctx.run.run(ctx.svc.get_job, ctx.caller, memory_id, job_id))


@router.post(
    "/v1/files",
    tags=["files"],
    responses=ok("File"),
    response_class=Response,
    # the media types the provider keeps, and only those (service/providers.py)
    openapi_extra={"requestBody": {"required": True, "content": {
        media: {"schema": {"type": "string", "format": "binary"}} for media in KEPT_MEDIA}}},
)
async def upload_file(
    request: Request,
    ctx: Context,
    name: Annotated[str, Query(min_length=1, max_length=255, description="File name")] = "file",
    idempotency_key: IdempotencyKey = None,
) -> Response:
    """Upload a file's raw bytes (the body); its media type is the ``Content-Type``.

    A record then names it in a file part: ``{"type": "file", "file": {"id": …}}``.
    """
    data = await request.body()
    media_type = request.headers.get("content-type", "application/octet-stream")
    media_type = media_type.split(";", 1)[0].strip().lower() or "application/octet-stream"
    return json_response(await ctx.run.run(
        ctx.svc.upload_file, ctx.caller, data, name=name, media_type=media_type,
        idempotency_key=idempotency_key))
