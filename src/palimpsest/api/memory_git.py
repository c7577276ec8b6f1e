"""Memory Git over HTTP: the Lethe routes under ``/api/memory`` plus proposals and reviews.

A *project* is one memory of the service (its ``hmem_…`` id), so the requirement's example
``curl -H "Authorization: Bearer …" http://127.0.0.1:<port>/api/memory/<project>/refs`` works
with the same bearer credentials as the UHP routes (the guard authenticates before any route).
Routes follow memory-git.md §7; the Charon-side objects (proposals, reviews, merge
authorizations, §10–§11) are served beside them because this server plays both roles.

Errors use Lethe's body, ``{"error": "<code>", "message": "<what to do>"}``, with Lethe's
statuses (§6): 400 invalid, 403 protected/forbidden/bad signature, 404 absent, 409 CAS,
idempotency, replay or conflict, 503 unavailable — and so do the guard's refusals (401, 413,
415, 421) and the router's (404, 405) on these paths; codes are kebab-case (:mod:`api.errors`).
An object reached by its id answers the same for "unknown" and "not yours to see".

Every handler decodes the body strictly, calls one service method with the authenticated
principal (``member:<id>``), and encodes the result. Nothing here decides a rule.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response

from palimpsest import canonical
from palimpsest.api import errors
from palimpsest.api.guard import PRINCIPAL_KEY
from palimpsest.api.params import IdempotencyKey
from palimpsest.api.runtime import json_response
from palimpsest.errors import InvalidInput, PalError
from palimpsest.service.memorygit.flow import ReviewFlow
from palimpsest.service.memorygit.reviewed import ReviewedWrites
from palimpsest.service.memorygit.wiring import open_flow

_LETHE_ERROR: dict[str, Any] = {
    "description": "Lethe error body",
    "content": {
        "application/json": {
            "schema": {
                "type": "object",
                "required": ["error", "message"],
                "properties": {"error": {"type": "string"}, "message": {"type": "string"}},
            }
        }
    },
}
router = APIRouter(
    prefix="/api/memory",
    tags=["memory-git"],
    responses={
        # every refusal, the guard's and the router's included, in the one face (api.errors)
        **{status: _LETHE_ERROR for status in (400, 401, 403, 404, 405, 409, 413, 415, 421,
                                               503)},
    },
)
MAX_BODY = 1 << 20
_OBJECT_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {"schema": {"type": "object", "additionalProperties": True}}
        },
    }
}


def install(app: FastAPI, svc: Any, *, flow: ReviewFlow | None = None) -> None:
    """Mount the routes on ``app`` and open Memory Git beside ``svc``'s data directory."""
    if flow is None:
        flow = open_flow(svc)
    app.state.memory_git = flow
    app.include_router(router)


def lethe_error(exc: PalError) -> Response:
    """Lethe's error body with Lethe's status for this error class (:mod:`api.errors`)."""
    status, body = errors.lethe_error(exc)
    response = json_response(body, status)
    retry = errors.retry_after_of(exc)
    if retry is not None:
        response.headers["retry-after"] = str(retry)
    return response


def _principal(request: Request) -> str:
    caller = request.scope.get(PRINCIPAL_KEY)
    member = getattr(caller, "member", None)
    if member is not None:
        return f"member:{member.id}"
    if isinstance(caller, str) and caller:
        return caller
    raise PalError("request reached a route without authentication", code="x.pal.internal")


async def _body(request: Request) -> dict[str, Any]:
    raw = await request.body()
    if not raw:
        return {}
    value = canonical.decode(raw, max_bytes=MAX_BODY, allow_floats=True, trailing_whitespace=True)
    if not isinstance(value, dict):
        raise InvalidInput("the request body must be a JSON object", code="invalid-body")
    return value


async def _run(
    request: Request,
    fn: Callable[..., Any],
    *args: Any,
    status: int = 200,
    body: bool = False,
    key: str | None = None,
) -> Response:
    """Decode, call ``fn(principal, *args[, body])`` off the event loop, encode.

    With an ``Idempotency-Key`` the call and its stored answer commit together; a replay
    returns the first status and body.
    """
    try:
        principal = _principal(request)
        payload = await _body(request) if body else None
        call_args = [principal, *args] + ([payload] if body else [])

        def call() -> dict[str, Any]:
            result = fn(*call_args)
            if isinstance(result, tuple):  # (document, created) from idempotent creators
                doc, created = result
                return {"status": status if created else 200, "body": doc}
            return {"status": status, "body": result}

        def guarded() -> dict[str, Any]:
            if key is None:
                return call()
            scope = f"memory-git {request.method} {request.url.path}"
            return _flow(request).idempotent(principal, scope, key, payload, call)

        runner = getattr(request.app.state, "runner", None)
        if runner is not None:
            out = await runner.run(guarded)
        else:
            out = await run_in_threadpool(guarded)
    except PalError as exc:
        return lethe_error(exc)
    return json_response(out["body"], out["status"])


def _flow(request: Request) -> ReviewFlow:
    flow = getattr(request.app.state, "memory_git", None)
    if not isinstance(flow, ReviewFlow):
        raise RuntimeError("Memory Git is not installed on this app")
    return flow


def _ref(name: str) -> str:
    return name if name.startswith("refs/") else f"refs/{name}"


# --- projects and refs -------------------------------------------------------------------
@router.get("/projects", summary="Projects (memories) with Memory Git history you can read")
async def projects(request: Request) -> Response:
    git = _flow(request).git
    return await _run(request, lambda p: {"projects": git.list_projects(p)})


@router.post(
    "/{project}/legacy-root",
    summary="Create the root and refs/shared/main",
    openapi_extra=_OBJECT_BODY,
)
async def legacy_root(
    request: Request, project: str, idempotency_key: IdempotencyKey = None
) -> Response:
    return await _run(request, _flow(request).git.init, project, status=201, key=idempotency_key)


@router.post(
    "/{project}/branches", summary="Create an owned ref at a head", openapi_extra=_OBJECT_BODY
)
async def branches(
    request: Request, project: str, idempotency_key: IdempotencyKey = None
) -> Response:
    return await _run(
        request,
        _flow(request).git.create_branch,
        project,
        status=201,
        body=True,
        key=idempotency_key,
    )


@router.get("/{project}/refs", summary="Every ref of the project")
async def refs(request: Request, project: str) -> Response:
    return await _run(request, _flow(request).git.list_refs, project)


@router.get("/{project}/refs/resolve", summary="One ref by ?name=")
async def resolve(request: Request, project: str, name: str) -> Response:
    return await _run(request, _flow(request).git.get_ref, project, _ref(name))


@router.post(
    "/{project}/refs/advance",
    summary="CAS-advance an owned unprotected ref",
    openapi_extra=_OBJECT_BODY,
)
async def advance(
    request: Request, project: str, idempotency_key: IdempotencyKey = None
) -> Response:
    return await _run(
        request, _flow(request).git.advance_ref, project, body=True, key=idempotency_key
    )


@router.post(
    "/{project}/refs/merge",
    summary="Advance a protected ref with a memory-git-merge/v2 authorization",
    openapi_extra=_OBJECT_BODY,
)
async def merge(request: Request, project: str, idempotency_key: IdempotencyKey = None) -> Response:
    return await _run(request, _flow(request).merge, project, body=True, key=idempotency_key)


@router.post(
    "/{project}/refs/{ref:path}/advance",
    summary="CAS-advance the named ref",
    openapi_extra=_OBJECT_BODY,
)
async def advance_named(
    request: Request, project: str, ref: str, idempotency_key: IdempotencyKey = None
) -> Response:
    git = _flow(request).git

    def call(principal: str, body: dict[str, Any]) -> Any:
        return git.advance_ref(principal, project, {**body, "ref_name": _ref(ref)})

    return await _run(request, call, body=True, key=idempotency_key)


@router.get("/{project}/refs/{ref:path}", summary="One ref")
async def get_ref(request: Request, project: str, ref: str) -> Response:
    return await _run(request, _flow(request).git.get_ref, project, _ref(ref))


# --- changesets ---------------------------------------------------------------------------
@router.post(
    "/changesets", summary="Create a changeset (CAS + idempotency key)", openapi_extra=_OBJECT_BODY
)
async def create_changeset(request: Request, idempotency_key: IdempotencyKey = None) -> Response:
    return await _run(
        request, _flow(request).git.create_changeset, status=201, body=True, key=idempotency_key
    )


@router.get("/changesets/{changeset_id}", summary="One changeset (integrity verified)")
async def get_changeset(request: Request, changeset_id: str) -> Response:
    return await _run(request, _flow(request).git.get_changeset, changeset_id)


@router.post(
    "/changesets/{changeset_id}/diff",
    summary="Semantic diff against a base",
    openapi_extra=_OBJECT_BODY,
)
async def diff(
    request: Request, changeset_id: str, idempotency_key: IdempotencyKey = None
) -> Response:
    return await _run(request, _flow(request).diff, changeset_id, body=True, key=idempotency_key)


@router.get("/{project}/changesets", summary="Log of a ref, newest first")
async def log(
    request: Request, project: str, ref: str = "refs/shared/main", limit: int = 20
) -> Response:
    return await _run(request, _flow(request).git.log, project, _ref(ref), limit)


# --- context, manifests, conflicts ----------------------------------------------------------
@router.get("/{project}/context", summary="memory-context/v1 projection at a head")
async def context_get(
    request: Request,
    project: str,
    *,
    ref: str = "refs/shared/main",
    head: str | None = None,
    query: str = "",
    limit: int | None = None,
) -> Response:
    body = {"ref_name": _ref(ref), "head_changeset_id": head, "query": query, "limit": limit}
    git = _flow(request).git
    return await _run(request, lambda p: git.context_at(p, project, body))


@router.post(
    "/{project}/context",
    summary="Projection, optionally pinned in a manifest",
    openapi_extra=_OBJECT_BODY,
)
async def context_post(
    request: Request, project: str, idempotency_key: IdempotencyKey = None
) -> Response:
    return await _run(
        request, _flow(request).git.context_at, project, body=True, key=idempotency_key
    )


@router.get("/manifests/{manifest_id}", summary="A context manifest")
async def manifest(request: Request, manifest_id: str) -> Response:
    return await _run(request, _flow(request).git.get_manifest, manifest_id)


@router.post(
    "/{project}/conflicts/detect",
    summary="Detect conflicts; writes nothing",
    openapi_extra=_OBJECT_BODY,
)
async def detect(
    request: Request, project: str, idempotency_key: IdempotencyKey = None
) -> Response:
    return await _run(request, _flow(request).detect, project, body=True, key=idempotency_key)


@router.get("/{project}/conflicts", summary="Persisted conflicts")
async def conflicts(
    request: Request, project: str, status: str | None = None, limit: int = 100
) -> Response:
    return await _run(request, _flow(request).list_conflicts, project, status, limit)


@router.post(
    "/{project}/conflicts/{conflict_id}/resolve",
    summary="Resolve a conflict",
    openapi_extra=_OBJECT_BODY,
)
async def resolve_conflict(
    request: Request, project: str, conflict_id: str, idempotency_key: IdempotencyKey = None
) -> Response:
    return await _run(
        request,
        _flow(request).resolve_conflict,
        project,
        conflict_id,
        body=True,
        key=idempotency_key,
    )


@router.post(
    "/{project}/conflicts/persist",
    summary="Attach detected conflicts to an open proposal",
    openapi_extra=_OBJECT_BODY,
)
async def persist_conflicts(
    request: Request, project: str, idempotency_key: IdempotencyKey = None
) -> Response:
    return await _run(
        request, _flow(request).persist_conflicts, project, body=True, key=idempotency_key
    )


@router.post(
    "/{project}/conflicts/retire",
    summary="Close a proposal's open conflicts with a status",
    openapi_extra=_OBJECT_BODY,
)
async def retire_conflicts(
    request: Request, project: str, idempotency_key: IdempotencyKey = None
) -> Response:
    return await _run(
        request, _flow(request).retire_conflicts, project, body=True, key=idempotency_key
    )


# --- proposals and reviews (the gateway side) --------------------------------------------------
@router.post(
    "/{project}/proposals",
    summary="Propose merging your owned ref (pinned head)",
    openapi_extra=_OBJECT_BODY,
)
async def propose(
    request: Request, project: str, idempotency_key: IdempotencyKey = None
) -> Response:
    return await _run(
        request, _flow(request).propose, project, status=201, body=True, key=idempotency_key
    )


@router.get("/{project}/proposals", summary="Proposals, newest first")
async def proposals(request: Request, project: str, status: str | None = None) -> Response:
    return await _run(request, _flow(request).list_proposals, project, status)


@router.get("/proposals/{proposal_id}", summary="A proposal with its reviews")
async def get_proposal(request: Request, proposal_id: str) -> Response:
    return await _run(request, _flow(request).get_proposal, proposal_id)


@router.post(
    "/proposals/{proposal_id}/reviews",
    summary="Independent review verdict",
    openapi_extra=_OBJECT_BODY,
)
async def review(
    request: Request, proposal_id: str, idempotency_key: IdempotencyKey = None
) -> Response:
    return await _run(
        request, _flow(request).review, proposal_id, status=201, body=True, key=idempotency_key
    )


@router.post("/proposals/{proposal_id}/cancel", summary="Cancel your own proposal")
async def cancel(
    request: Request, proposal_id: str, idempotency_key: IdempotencyKey = None
) -> Response:
    return await _run(request, _flow(request).cancel, proposal_id, key=idempotency_key)


@router.post(
    "/proposals/{proposal_id}/authorize",
    summary="Sign a merge authorization for an approving reviewer",
    openapi_extra=_OBJECT_BODY,
)
async def authorize(
    request: Request, proposal_id: str, idempotency_key: IdempotencyKey = None
) -> Response:
    return await _run(
        request, _flow(request).authorize, proposal_id, body=True, key=idempotency_key
    )


# --- reviewed memories (project extension) ------------------------------------------------------
@router.get("/{project}/settings", summary="Review settings of a memory (extension)")
async def settings(request: Request, project: str) -> Response:
    return await _run(request, ReviewedWrites(_flow(request)).settings, project)


@router.put(
    "/{project}/settings",
    summary="Require review for agents' writes (extension)",
    openapi_extra=_OBJECT_BODY,
)
async def put_settings(
    request: Request, project: str, idempotency_key: IdempotencyKey = None
) -> Response:
    return await _run(
        request,
        ReviewedWrites(_flow(request)).put_settings,
        project,
        body=True,
        key=idempotency_key,
    )


@router.post(
    "/{project}/records",
    summary="A write into a reviewed memory: lands on your ref, opens a proposal",
    openapi_extra=_OBJECT_BODY,
)
async def reviewed_write(
    request: Request, project: str, idempotency_key: IdempotencyKey = None
) -> Response:
    gate = ReviewedWrites(_flow(request))
    if idempotency_key is None:
        return lethe_error(
            InvalidInput("a reviewed write needs an Idempotency-Key header", code="missing-field")
        )
    key = idempotency_key

    def call(principal: str, body: dict[str, Any]) -> Any:
        # The gate keeps its own per-key replay (same write → same answer, else 409).
        return gate.write(principal, project, body, idempotency_key=key)

    return await _run(request, call, status=202, body=True)


__all__ = ["install", "lethe_error", "router"]
