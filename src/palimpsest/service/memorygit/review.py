"""Proposals and independent reviews (memory-git.md §10) as pure functions over values.

A proposal asks to move a protected target ref (``refs/shared/*``) to what an owned source ref
held **at creation**: ``head_changeset_id`` is pinned then and never follows the branch, so an
approval can never cover commits made after it. Every review carries the proposal digest it saw
(the snapshot); a merge needs an ``approve`` bound to the current digest, from a principal other
than the originator, and no blocking verdict.

States: ``open`` → ``approved`` (some approval) → ``merged``; ``open``/``approved`` →
``changes_requested`` (the author commits again and opens a **new** proposal) | ``rejected``
(terminal) | ``canceled`` (by the originator). Nothing is deleted: closed proposals and all
their reviews stay readable.

The proposal digest is our own (Charon's is not public, §14.1): SHA-256 of the canonical JSON of
the pinned fields below. The envelope only requires 64 lower-case hex characters.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from palimpsest.errors import Conflict, Forbidden, InvalidInput
from palimpsest.service import history

VERDICTS = ("approve", "request_changes", "reject")
SEVERITIES = ("info", "minor", "major", "critical")
OPEN_STATES = ("open", "approved")
KINDS = ("merge_request", "changeset", "memory")


@dataclass(frozen=True, slots=True)
class Proposal:
    """A merge request pinned to an exact source head."""

    proposal_id: str
    project_id: str
    kind: str
    source_ref: str
    target_ref: str
    base_changeset_id: str | None  # the target head when the proposal was opened
    head_changeset_id: str  # the source head, pinned
    originator: str
    message: str
    selected_ops: tuple[str, ...]  # "<changeset_id>:<ordinal>" for a cherry-pick; () = all
    created_at: str
    status: str = "open"
    updated_at: str = ""
    merged_changeset_id: str | None = None
    conflict_ids: tuple[str, ...] = ()

    def digest(self) -> str:
        """SHA-256 hex over the pinned fields: what a review is bound to."""
        pinned = {"proposal_id": self.proposal_id, "project_id": self.project_id,
                  "kind": self.kind, "source_ref": self.source_ref,
                  "target_ref": self.target_ref, "base_changeset_id": self.base_changeset_id,
                  "head_changeset_id": self.head_changeset_id, "originator": self.originator,
                  "selected_ops": list(self.selected_ops)}
        return history.digest(pinned)

    def to_wire(self) -> dict[str, Any]:
        """The proposal as the API returns it."""
        return {"proposal_id": self.proposal_id, "object": "memory_git.proposal",
                "project_id": self.project_id, "kind": self.kind,
                "source_ref": self.source_ref, "target_ref": self.target_ref,
                "base_changeset_id": self.base_changeset_id,
                "head_changeset_id": self.head_changeset_id,
                "originator_principal": self.originator, "message": self.message,
                "selected_ops": list(self.selected_ops),
                "conflict_ids": list(self.conflict_ids), "status": self.status,
                "proposal_digest": self.digest(),
                "merged_changeset_id": self.merged_changeset_id,
                "created_at": self.created_at, "updated_at": self.updated_at or self.created_at}


@dataclass(frozen=True, slots=True)
class Review:
    """One verdict by one principal, bound to the proposal digest it saw."""

    review_id: str
    proposal_id: str
    reviewer: str
    verdict: str
    snapshot_digest: str
    comment: str
    severity: str
    created_at: str

    def to_wire(self) -> dict[str, Any]:
        """The review as the API returns it."""
        return {"review_id": self.review_id, "object": "memory_git.review",
                "proposal_id": self.proposal_id, "reviewer_principal": self.reviewer,
                "verdict": self.verdict, "proposal_digest": self.snapshot_digest,
                "comment": self.comment, "severity": self.severity,
                "created_at": self.created_at}


def _closed(proposal: Proposal) -> Conflict:
    return Conflict(f"proposal is {proposal.status}", code="proposal-closed",
                    hint="open a new proposal from your owned ref")


def review(proposal: Proposal, *, review_id: str, reviewer: str, verdict: str, comment: str,
           severity: str, now: str) -> tuple[Proposal, Review]:
    """Record a verdict; returns the proposal's new state and the review.

    Raises:
        Forbidden: the reviewer is the originator (self-review is denied in code).
        InvalidInput: unknown verdict or severity.
        Conflict: the proposal is no longer open.
    """
    if verdict not in VERDICTS:
        raise InvalidInput(f"verdict must be one of {', '.join(VERDICTS)}", code="invalid-verdict")
    if severity not in SEVERITIES:
        raise InvalidInput(f"severity must be one of {', '.join(SEVERITIES)}",
                           code="invalid-severity")
    if reviewer == proposal.originator:
        raise Forbidden("the originator of a proposal cannot review it", code="self-review",
                        hint="ask another member to review")
    if proposal.status not in OPEN_STATES:
        raise _closed(proposal)
    status = {"approve": "approved", "request_changes": "changes_requested",
              "reject": "rejected"}[verdict]
    if verdict == "approve" and proposal.status == "approved":
        status = "approved"
    verdict_row = Review(review_id, proposal.proposal_id, reviewer, verdict, proposal.digest(),
                         comment, severity, now)
    return replace(proposal, status=status, updated_at=now), verdict_row


def cancel(proposal: Proposal, *, by: str, now: str) -> Proposal:
    """Cancel an open proposal; only its originator may. History (reviews) is kept.

    Raises:
        Forbidden: someone else tries to cancel.
        Conflict: the proposal is already closed.
    """
    if by != proposal.originator:
        raise Forbidden("only the originator can cancel a proposal", code="not-originator")
    if proposal.status not in OPEN_STATES:
        raise _closed(proposal)
    return replace(proposal, status="canceled", updated_at=now)


def check_mergeable(proposal: Proposal, reviews: list[Review], *, reviewer: str,
                    merger: str) -> None:
    """Refuse a merge that independent review does not cover.

    Raises:
        Forbidden: the merger or the named reviewer is the originator, or the reviewer has no
            approval bound to the proposal's current snapshot.
        Conflict: the proposal is closed or a blocking verdict stands.
    """
    if merger == proposal.originator:
        raise Forbidden("the originator of a proposal cannot merge it", code="self-merge",
                        hint="a reviewer other than the author merges")
    if reviewer == proposal.originator:
        raise Forbidden("the originator of a proposal cannot review it", code="self-review")
    if proposal.status != "approved":
        raise _closed(proposal) if proposal.status not in OPEN_STATES else Conflict(
            "proposal has no approval yet", code="not-approved",
            hint="a member other than the author must approve it first")
    digest = proposal.digest()
    if any(r.verdict != "approve" for r in reviews):
        raise Conflict("a review requested changes or rejected this proposal",
                       code="review-blocked")
    if not any(r.reviewer == reviewer and r.verdict == "approve" and r.snapshot_digest == digest
               for r in reviews):
        raise Forbidden("the named reviewer has not approved this exact proposal snapshot",
                        code="not-approved-by-reviewer")


def merged(proposal: Proposal, *, new_head: str, now: str) -> Proposal:
    """The proposal after its merge advanced the target ref."""
    return replace(proposal, status="merged", merged_changeset_id=new_head, updated_at=now)


__all__ = ["KINDS", "OPEN_STATES", "SEVERITIES", "VERDICTS", "Proposal", "Review", "cancel",
           "check_mergeable", "merged", "review"]
