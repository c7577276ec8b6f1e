"""The Memory Git routes (``/api/memory/…``, docs/memory-git.md) as request builders.

A *project* is a memory's ``hmem_…`` id; the caller is the member behind the credential (the
server stamps every author). Ref names may omit their ``refs/`` prefix where a route takes one
in its path. Refusals of these routes use the ``{"error", "message"}`` body, which the client
turns into the same error tree as the UHP routes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

from palimpsest.client.models import (
    Changeset,
    ChangesetLog,
    Json,
    MemoryContext,
    Merge,
    PendingReview,
    Proposal,
    Ref,
    ReviewSettings,
    RootCreated,
)
from palimpsest.client.transport import Call, body_of, segment

BASE = "/api/memory"


def _p(project: str) -> str:
    return f"{BASE}/{segment(project)}"


def _ref_path(ref: str) -> str:
    return quote(ref, safe="/")


def projects() -> Call[Json]:
    """Projects (memories) with Memory Git history the caller can read: ``{projects}``."""
    return Call("GET", f"{BASE}/projects")


def init(project: str, *, idempotency_key: str | None = None) -> Call[RootCreated]:
    """Create the root changeset and ``refs/shared/main`` (idempotent)."""
    return Call("POST", f"{_p(project)}/legacy-root", body={}, idempotency_key=idempotency_key)


def refs(project: str) -> Call[list[Ref]]:
    """Every ref of the project."""
    return Call("GET", f"{_p(project)}/refs")


def get_ref(project: str, ref: str) -> Call[Ref]:
    """One ref (``refs/shared/main`` or ``shared/main``)."""
    return Call("GET", f"{_p(project)}/refs/resolve", query={"name": ref})


def branch(project: str, ref_name: str, head_changeset_id: str, *,
           idempotency_key: str | None = None) -> Call[Ref]:
    """Create an owned ref (e.g. ``refs/agents/<your member id>/main``) at a head."""
    return Call("POST", f"{_p(project)}/branches",
                body={"ref_name": ref_name, "head_changeset_id": head_changeset_id},
                idempotency_key=idempotency_key)


def advance(project: str, ref_name: str, *, expected_head: str | None, new_head: str,
            idempotency_key: str | None = None) -> Call[Ref]:
    """Compare-and-swap an owned, unprotected ref from ``expected_head`` to ``new_head``."""
    return Call("POST", f"{_p(project)}/refs/{_ref_path(ref_name.removeprefix('refs/'))}/advance",
                body={"expected_head": expected_head, "new_head": new_head},
                idempotency_key=idempotency_key)


def merge(project: str, request: Json, *, idempotency_key: str | None = None) -> Call[Merge]:
    """Advance a protected ref with a signed ``memory-git-merge/v2`` authorization (the body
    :func:`authorize` returns, as it is)."""
    body = {k: v for k, v in request.items() if k != "strategy"}  # informative, not a field
    return Call("POST", f"{_p(project)}/refs/merge", body=body, idempotency_key=idempotency_key)


def commit(project: str, ref_name: str, ops: Sequence[Json], *, idempotency_key: str,
           expected_head: str | None = None, message: str | None = None,
           parent_ids: Sequence[str] | None = None, advance_ref: bool | None = None,
           create_ref_if_missing: bool | None = None, extra: Json | None = None
           ) -> Call[Changeset]:
    """Create a changeset on ``ref_name`` (compare-and-swap on ``expected_head``). ``extra``
    carries the optional provenance fields (``session_id``, ``evidence``, …) unchanged."""
    body: dict[str, Any] = {"project_id": project, "ref_name": ref_name, "ops": list(ops),
                            "idempotency_key": idempotency_key}
    body.update(body_of(expected_head=expected_head, message=message,
                        parent_ids=list(parent_ids) if parent_ids is not None else None,
                        advance_ref=advance_ref, create_ref_if_missing=create_ref_if_missing))
    body.update(extra or {})
    return Call("POST", f"{BASE}/changesets", body=body)


def changeset(changeset_id: str) -> Call[Changeset]:
    """One changeset (its integrity digest verified by the server)."""
    return Call("GET", f"{BASE}/changesets/{segment(changeset_id)}")


def log(project: str, *, ref: str | None = None, limit: int | None = None) -> Call[ChangesetLog]:
    """Changesets reachable from a ref, newest first."""
    return Call("GET", f"{_p(project)}/changesets", query={"ref": ref, "limit": limit})


def diff(changeset_id: str, *, base_changeset_id: str | None = None) -> Call[Json]:
    """Semantic diff of a changeset against a base (default: its first parent)."""
    return Call("POST", f"{BASE}/changesets/{segment(changeset_id)}/diff",
                body=body_of(base_changeset_id=base_changeset_id))


def context(project: str, *, ref: str | None = None, head: str | None = None,
            query: str | None = None, limit: int | None = None) -> Call[MemoryContext]:
    """Accepted memory at a head (``memory-context/v1``)."""
    return Call("GET", f"{_p(project)}/context",
                query={"ref": ref, "head": head, "query": query, "limit": limit})


def pin_context(project: str, *, ref_name: str | None = None, head_changeset_id: str | None = None,
                query: str | None = None, limit: int | None = None,
                create_manifest: bool | None = None, session_id: str | None = None,
                idempotency_key: str | None = None) -> Call[MemoryContext]:
    """The projection, optionally pinned in an input manifest (``create_manifest=True``)."""
    return Call("POST", f"{_p(project)}/context", body=body_of(
        ref_name=ref_name, head_changeset_id=head_changeset_id, query=query, limit=limit,
        create_manifest=create_manifest, session_id=session_id),
        idempotency_key=idempotency_key)


def manifest(manifest_id: str) -> Call[Json]:
    """A pinned context manifest."""
    return Call("GET", f"{BASE}/manifests/{segment(manifest_id)}")


def detect_conflicts(project: str, *, base_changeset_id: str, left_changeset_id: str,
                     right_changeset_id: str) -> Call[Json]:
    """Conflicts between two changesets over a base; writes nothing."""
    return Call("POST", f"{_p(project)}/conflicts/detect", body={
        "base_changeset_id": base_changeset_id, "left_changeset_id": left_changeset_id,
        "right_changeset_id": right_changeset_id})


def conflicts(project: str, *, status: str | None = None,
              limit: int | None = None) -> Call[Json]:
    """Persisted conflicts."""
    return Call("GET", f"{_p(project)}/conflicts", query={"status": status, "limit": limit})


def resolve_conflict(project: str, conflict_id: str, note: str, *,
                     idempotency_key: str | None = None) -> Call[Json]:
    """Resolve a conflict (not by the proposal's author)."""
    return Call("POST", f"{_p(project)}/conflicts/{segment(conflict_id)}/resolve",
                body={"resolution_note": note}, idempotency_key=idempotency_key)


def persist_conflicts(project: str, proposal_id: str, found: Sequence[Json], *,
                      idempotency_key: str | None = None) -> Call[Json]:
    """Attach detected conflicts to an open proposal."""
    return Call("POST", f"{_p(project)}/conflicts/persist",
                body={"proposal_id": proposal_id, "conflicts": list(found)},
                idempotency_key=idempotency_key)


def retire_conflicts(project: str, proposal_id: str, status: str, *,
                     idempotency_key: str | None = None) -> Call[Json]:
    """Close a proposal's open conflicts with ``status``."""
    return Call("POST", f"{_p(project)}/conflicts/retire",
                body={"proposal_id": proposal_id, "status": status},
                idempotency_key=idempotency_key)


def propose(project: str, source_ref: str, *, idempotency_key: str,
            target_ref: str | None = None, message: str | None = None,
            selected_ops: Sequence[str] | None = None,
            head_changeset_id: str | None = None) -> Call[Proposal]:
    """Propose merging an owned ref, pinned at its current head (``selected_ops`` lists
    ``<changeset>:<ordinal>`` for a cherry-pick)."""
    return Call("POST", f"{_p(project)}/proposals", body=body_of(
        source_ref=source_ref, target_ref=target_ref, message=message,
        selected_ops=list(selected_ops) if selected_ops is not None else None,
        head_changeset_id=head_changeset_id, idempotency_key=idempotency_key))


def proposals(project: str, *, status: str | None = None) -> Call[list[Proposal]]:
    """Proposals, newest first."""
    return Call("GET", f"{_p(project)}/proposals", query={"status": status})


def proposal(proposal_id: str) -> Call[Proposal]:
    """One proposal with its reviews."""
    return Call("GET", f"{BASE}/proposals/{segment(proposal_id)}")


def review(proposal_id: str, verdict: str, *, comment: str | None = None,
           severity: str | None = None, idempotency_key: str | None = None) -> Call[Json]:
    """An independent verdict (``approve``, ``request_changes``, ``reject``)."""
    return Call("POST", f"{BASE}/proposals/{segment(proposal_id)}/reviews",
                body=body_of(verdict=verdict, comment=comment, severity=severity),
                idempotency_key=idempotency_key)


def cancel(proposal_id: str, *, idempotency_key: str | None = None) -> Call[Proposal]:
    """Cancel your own open proposal."""
    return Call("POST", f"{BASE}/proposals/{segment(proposal_id)}/cancel", body={},
                idempotency_key=idempotency_key)


def authorize(proposal_id: str, *, reviewer_principal: str | None = None) -> Call[Json]:
    """A signed merge authorization for the caller: the body :func:`merge` sends."""
    return Call("POST", f"{BASE}/proposals/{segment(proposal_id)}/authorize",
                body=body_of(reviewer_principal=reviewer_principal))


def settings(project: str) -> Call[ReviewSettings]:
    """Whether the memory takes agents' writes as proposals."""
    return Call("GET", f"{_p(project)}/settings")


def put_settings(project: str, *, review_required: bool,
                 reviewed_types: Sequence[str] | None = None,
                 idempotency_key: str | None = None) -> Call[ReviewSettings]:
    """Require review (or not) for the writes of these member types (needs ``delete``)."""
    return Call("PUT", f"{_p(project)}/settings", body=body_of(
        review_required=review_required,
        reviewed_types=list(reviewed_types) if reviewed_types is not None else None),
        idempotency_key=idempotency_key)


def reviewed_write(project: str, body: Json, *, idempotency_key: str) -> Call[PendingReview]:
    """A UHP-shaped write into a reviewed memory: lands on your ref and opens a proposal."""
    return Call("POST", f"{_p(project)}/records", body=body, idempotency_key=idempotency_key)
