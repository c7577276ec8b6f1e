"""Memory Git review flow: propose, review, authorize, merge, cancel (memory-git.md §10–§11).

This server plays both roles of the upstream pair: Charon (proposals, reviews, principals,
signing merge authorizations) and Lethe (verifying the envelope independently and advancing the
protected ref). :meth:`ReviewFlow.authorize` signs for an approving reviewer;
:meth:`ReviewFlow.merge` trusts nothing it signed earlier and re-verifies the envelope exactly
as an external Lethe would, then consumes the nonce in the same storage transaction as the
protected ref's compare-and-swap.

Merge shapes (checked before the transaction):

- ``fast_forward``: ``new_head`` is the proposal's pinned head and descends from
  ``expected_head``;
- ``merge_commit``: ``new_head`` has exactly the parents ``[expected_head, pinned head]``;
- ``cherry_pick``: ``new_head`` has the single parent ``expected_head`` and carries exactly the
  proposal's selected ops, each marked ``cherrypicked_from``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from palimpsest.errors import Conflict, Forbidden, InvalidInput, NotFound
from palimpsest.service import history
from palimpsest.service.memorygit import diff as gitdiff
from palimpsest.service.memorygit import mergeauth, review
from palimpsest.service.memorygit.mergeauth import KeyRing, MergeRequest
from palimpsest.service.memorygit.repository import (
    GitService,
    check_ref_name,
    hidden,
    is_protected,
    new_id,
)
from palimpsest.service.memorygit.review import Proposal, Review
from palimpsest.service.model import Op

_CONFLICT_KEYS = ("conflict_id", "conflict_type", "severity", "summary")
_HEX64 = re.compile(r"[0-9a-f]{64}")
_MERGE_FIELDS = ("ref_name", "expected_head", "new_head", "merge_proposal_id",
                 "reviewer_principal", "merge_authorization")


def _proposal(doc: dict[str, Any]) -> Proposal:
    return Proposal(
        proposal_id=doc["proposal_id"], project_id=doc["project_id"], kind=doc["kind"],
        source_ref=doc["source_ref"], target_ref=doc["target_ref"],
        base_changeset_id=doc["base_changeset_id"], head_changeset_id=doc["head_changeset_id"],
        originator=doc["originator_principal"], message=doc["message"],
        selected_ops=tuple(doc["selected_ops"]), created_at=doc["created_at"],
        status=doc["status"], updated_at=doc["updated_at"],
        merged_changeset_id=doc["merged_changeset_id"],
        conflict_ids=tuple(doc["conflict_ids"]))


def _review(doc: dict[str, Any]) -> Review:
    return Review(doc["review_id"], doc["proposal_id"], doc["reviewer_principal"],
                  doc["verdict"], doc["proposal_digest"], doc["comment"], doc["severity"],
                  doc["created_at"])


def _str(body: dict[str, Any], name: str, *, required: bool = True) -> str:
    value = body.get(name)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value):
        raise InvalidInput(f"{name} is required and must be a string", code="missing-field")
    if len(value) > 4096:
        raise InvalidInput(f"{name} is too long", code="too-large")
    return value


class ReviewFlow:
    """Proposals, reviews and signed merges over a :class:`GitService`."""

    def __init__(self, git: GitService, ring: KeyRing | Callable[[], KeyRing]) -> None:
        """Use ``ring`` both to sign (active key) and to verify (every key: rotation).

        ``ring`` may be a loader, called on first use (plain writes never need the keys).
        """
        self.git = git
        self._ring = ring

    @property
    def ring(self) -> KeyRing:
        """The merge key ring (loaded on first use)."""
        if not isinstance(self._ring, KeyRing):
            self._ring = self._ring()
        return self._ring

    def idempotent(self, principal: str, scope: str, key: str, request: Any,
                   write: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """Run ``write`` once per (principal, scope, ``Idempotency-Key``), atomically with it.

        The same request again returns the stored answer; another request under the key is
        ``idempotency_mismatch`` (409). Refusals are not stored: a retry runs again.
        """
        digest = history.request_digest("memory-git", scope, request)
        with self.git.store.transaction():
            prior = self.git.store.replay(principal, scope, key)
            if prior is not None:
                history.check_replay(prior[0], digest)
                stored: dict[str, Any] = prior[1]
                return stored
            answer = write()
            self.git.store.remember_response(principal, scope, key, digest=digest,
                                             response=answer,
                                             now_ms=self.git.clock() // 1_000_000)
            return answer

    def get_proposal(self, principal: str, proposal_id: str) -> dict[str, Any]:
        """A proposal with its reviews (closed ones stay readable)."""
        doc = self.git.store.proposal(proposal_id)
        if doc is None:
            raise hidden("proposal")
        self.git.require_visible(principal, doc["project_id"], "read", "proposal")
        return {**doc, "reviews": self.git.store.reviews(proposal_id)}

    def list_proposals(self, principal: str, project: str,
                       status: str | None = None) -> list[dict[str, Any]]:
        """Proposals of a project, newest first."""
        self.git.access.require(principal, project, "read")
        return self.git.store.proposals(project, status)

    def propose(self, principal: str, project: str, body: dict[str, Any]) -> tuple[
            dict[str, Any], bool]:
        """Open a proposal from an owned ref into a protected ref, pinned to its head.

        Raises:
            Forbidden: the source ref is not the caller's. InvalidInput: the target is not
            protected or ``head_changeset_id`` is not the source's current head.
            Conflict: idempotency mismatch.
        """
        self.git.access.require(principal, project, "write")
        source = check_ref_name(_str(body, "source_ref"))
        target = check_ref_name(str(body.get("target_ref") or "refs/shared/main"))
        key = _str(body, "idempotency_key")
        selected = body.get("selected_ops") or []
        if not isinstance(selected, list) or not all(isinstance(s, str) for s in selected):
            raise InvalidInput("selected_ops must be an array of '<changeset_id>:<ordinal>'")
        request = {"project": project, "source_ref": source, "target_ref": target,
                   "head_changeset_id": body.get("head_changeset_id"),
                   "base_changeset_id": body.get("base_changeset_id"),
                   "message": body.get("message", ""), "selected_ops": selected}
        digest = history.request_digest("proposal", project, request)
        prior = self.git.store.proposal_by_key(project, principal, key)
        if prior is not None:
            history.check_replay(prior[1], digest)
            return self.get_proposal(principal, prior[0]), False
        if not is_protected(target):
            raise InvalidInput("proposals target a protected refs/shared/* ref",
                               code="invalid-target")
        src = self.git.ref_or_404(project, source)
        if src["created_by_principal"] != principal:
            raise Forbidden("you can only propose from your own ref", code="ref-not-owned")
        head = src["head_changeset_id"]
        if head is None:
            raise InvalidInput("the source ref has no changesets", code="empty-source")
        if body.get("head_changeset_id") not in (None, head):
            raise Conflict("head_changeset_id is not the source ref's current head",
                           code="cas_mismatch", hint="re-read the source ref")
        tgt = self.git.ref_or_404(project, target)
        base = tgt["head_changeset_id"]
        if body.get("base_changeset_id") not in (None, base):
            raise Conflict("base_changeset_id is not the target's current head",
                           code="cas_mismatch", hint="re-read the target ref")
        mine = {cs.id: len(cs.ops) for cs in self.git.only_in(head, base)}
        for item in selected:
            cid, _, ordinal = item.partition(":")
            if (cid not in mine or not ordinal.isdigit() or len(ordinal) > 6
                    or int(ordinal) >= mine[cid]):
                raise InvalidInput(f"selected op {item[:80]!r} is not on the source branch",
                                   code="invalid-selection")
        conflicts = self._conflicts(project, base, head)
        now = self.git.now()
        proposal = Proposal(
            proposal_id=new_id(self.git.clock()), project_id=project,
            kind="changeset" if selected else "merge_request", source_ref=source,
            target_ref=target, base_changeset_id=base, head_changeset_id=head,
            originator=principal, message=str(body.get("message", ""))[:4096],
            selected_ops=tuple(selected), created_at=now,
            conflict_ids=tuple(c["conflict_id"] for c in conflicts))
        stored = [{**c, "status": "open", "proposal_id": proposal.proposal_id,
                   "created_at": now} for c in conflicts]
        self.git.store.put_proposal(proposal.to_wire(), key=key, request_digest=digest,
                                    conflicts=stored)
        return self.get_proposal(principal, proposal.proposal_id), True

    def _conflicts(self, project: str, base: str | None, head: str) -> list[dict[str, Any]]:
        merge_base = self.git.merge_base(base, head)
        left = self.git.project(project, base)
        return gitdiff.detect(project, base_id=merge_base, left_id=base or "", right_id=head,
                              left=left, right_changesets=self.git.only_in(head, merge_base),
                              left_is_ancestor=merge_base == base)

    def detect(self, principal: str, project: str, body: dict[str, Any]) -> dict[str, Any]:
        """Pure conflict detection between two heads over a base; writes nothing."""
        self.git.access.require(principal, project, "read")
        base = body.get("base_changeset_id")
        if base is not None and not isinstance(base, str):
            raise InvalidInput("base_changeset_id must be a string")
        left = _str(body, "left_changeset_id")
        right = _str(body, "right_changeset_id")
        for cid in (base, left, right):
            if cid:
                self.git.in_project(project, cid)
        found = gitdiff.detect(
            project, base_id=base, left_id=left, right_id=right,
            left=self.git.project(project, left),
            right_changesets=self.git.only_in(right, base),
            left_is_ancestor=base == left)
        return {"conflicts": found}

    def diff(self, principal: str, changeset_id: str, body: dict[str, Any]) -> dict[str, Any]:
        """``SemanticDiff`` of a changeset against a base (default: its first parent)."""
        cs = self.git.load(changeset_id)
        self.git.require_visible(principal, cs.memory_id, "read", "changeset")
        base = body.get("base_changeset_id")
        if base is None:
            base = cs.parent_ids[0] if cs.parent_ids else None
        elif not isinstance(base, str):
            raise InvalidInput("base_changeset_id must be a string")
        else:
            self.git.in_project(cs.memory_id, base)
        return gitdiff.semantic_diff(self.git.project(cs.memory_id, base),
                                     self.git.only_in(changeset_id, base))

    def list_conflicts(self, principal: str, project: str, status: str | None,
                       limit: int) -> dict[str, Any]:
        """Persisted conflicts (limit ≤ 500)."""
        self.git.access.require(principal, project, "read")
        if not 1 <= limit <= 500:
            raise InvalidInput("limit must be between 1 and 500", code="invalid-limit")
        return {"conflicts": self.git.store.conflicts(project, status, limit)}

    def resolve_conflict(self, principal: str, project: str, conflict_id: str,
                         body: dict[str, Any]) -> dict[str, Any]:
        """Mark an open conflict resolved with a note; the proposal's author cannot."""
        self.git.access.require(principal, project, "write")
        note = _str(body, "resolution_note")
        rows = [c for c in self.git.store.conflicts(project, "open", 500)
                if c["conflict_id"] == conflict_id]
        if not rows:
            raise NotFound("no open conflict with that id", code="conflict-not-found")
        for row in rows:
            doc = self.git.store.proposal(row["proposal_id"])
            if doc is not None and doc["originator_principal"] == principal:
                raise Forbidden("the author of a proposal cannot resolve its conflicts",
                                code="self-review")
        self.git.store.set_conflict_status(project, conflict_id, proposal_id=None,
                                           status="resolved", note=note, now=self.git.now())
        return {"resolved": len(rows), "conflict_id": conflict_id}

    def persist_conflicts(self, principal: str, project: str,
                          body: dict[str, Any]) -> dict[str, Any]:
        """Attach detected conflicts (``conflicts/detect`` output) to an open proposal."""
        self.git.access.require(principal, project, "write")
        doc = self._open_proposal(project, _str(body, "proposal_id"))
        items = body.get("conflicts")
        if not isinstance(items, list) or not items or len(items) > 100:
            raise InvalidInput("conflicts must be a non-empty array of at most 100 conflicts")
        now = self.git.now()
        rows = []
        for item in items:
            if not isinstance(item, dict) or not all(
                    isinstance(item.get(k), str) and item.get(k) for k in _CONFLICT_KEYS):
                raise InvalidInput(f"each conflict needs the strings {', '.join(_CONFLICT_KEYS)}",
                                   code="invalid-conflict")
            if not _HEX64.fullmatch(item["conflict_id"]):
                raise InvalidInput("conflict_id must be 64 lower-case hex digits",
                                   code="invalid-conflict")
            rows.append({k: item[k] for k in (*_CONFLICT_KEYS, "base_changeset_id",
                                             "left_changeset_id", "right_changeset_id")
                         if isinstance(item.get(k), str)}
                        | {"project_id": project, "status": "open",
                           "proposal_id": doc["proposal_id"], "created_at": now})
        self.git.store.add_conflicts(project, doc["proposal_id"], rows)
        return {"persisted": len(rows), "proposal_id": doc["proposal_id"]}

    def retire_conflicts(self, principal: str, project: str,
                         body: dict[str, Any]) -> dict[str, Any]:
        """Close every open conflict of a proposal with a lifecycle status (not by its author)."""
        self.git.access.require(principal, project, "write")
        pid = _str(body, "proposal_id")
        status = _str(body, "status")
        if status not in ("resolved", "rejected", "superseded", "canceled", "deferred"):
            raise InvalidInput("status must be resolved, rejected, superseded, canceled or "
                               "deferred", code="invalid-status")
        doc = self.git.store.proposal(pid)
        if doc is None or doc["project_id"] != project:
            raise hidden("proposal")
        if doc["originator_principal"] == principal:
            raise Forbidden("the author of a proposal cannot retire its conflicts",
                            code="self-review")
        changed = self.git.store.set_conflict_status(project, "", proposal_id=pid,
                                                     status=status, note=None,
                                                     now=self.git.now())
        return {"retired": changed, "proposal_id": pid, "status": status}

    def _open_proposal(self, project: str, proposal_id: str) -> dict[str, Any]:
        doc = self.git.store.proposal(proposal_id)
        if doc is None or doc["project_id"] != project:
            raise hidden("proposal")
        if doc["status"] not in review.OPEN_STATES:
            raise Conflict(f"proposal is {doc['status']}", code="proposal-closed")
        return doc

    def review(self, principal: str, proposal_id: str, body: dict[str, Any]) -> dict[str, Any]:
        """Record an independent verdict bound to the proposal's snapshot."""
        doc = self.get_proposal(principal, proposal_id)
        self.git.access.require(principal, doc["project_id"], "write")
        before = _proposal(doc)
        after, verdict = review.review(
            before, review_id=new_id(self.git.clock()), reviewer=principal,
            verdict=_str(body, "verdict"), comment=_str(body, "comment", required=False),
            severity=str(body.get("severity") or "info"), now=self.git.now())
        self.git.store.put_review(verdict.to_wire(), after.to_wire(), before.status)
        return verdict.to_wire()

    def cancel(self, principal: str, proposal_id: str) -> dict[str, Any]:
        """Cancel (originator only); reviews and conflicts stay as history."""
        doc = self.get_proposal(principal, proposal_id)
        after = review.cancel(_proposal(doc), by=principal, now=self.git.now())
        self.git.store.put_proposal(after.to_wire(), key=None, request_digest=None,
                                    conflicts=[])
        self.git.store.set_conflict_status(doc["project_id"], "", proposal_id=proposal_id,
                                           status="canceled", note=None, now=self.git.now())
        return self.get_proposal(principal, proposal_id)

    def _mergeable(self, principal: str, proposal: Proposal, reviewer: str) -> None:
        reviews = [_review(r) for r in self.git.store.reviews(proposal.proposal_id)]
        review.check_mergeable(proposal, reviews, reviewer=reviewer, merger=principal)
        blocking = [c for c in self.git.store.conflicts(proposal.project_id, "open", 500)
                    if c["proposal_id"] == proposal.proposal_id
                    and c["conflict_type"] in gitdiff.BLOCKING]
        if blocking:
            raise Conflict(f"{len(blocking)} blocking conflict(s) are unresolved",
                           code="unresolved-conflicts",
                           hint="resolve them (conflicts/{id}/resolve) or reject the proposal")

    def authorize(self, principal: str, proposal_id: str, body: dict[str, Any],
                  *, ttl_ns: int = 10 * 60 * 1_000_000_000) -> dict[str, Any]:
        """As the gateway: prepare ``new_head`` and sign a merge authorization for the caller.

        The caller is the merger and, unless ``reviewer_principal`` names another approver, the
        reviewer. Returns the merge request body ready for ``POST …/refs/merge``.
        """
        proposal = _proposal(self.get_proposal(principal, proposal_id))
        reviewer = str(body.get("reviewer_principal") or principal)
        self._mergeable(principal, proposal, reviewer)
        project = proposal.project_id
        expected = self.git.ref_or_404(project, proposal.target_ref)["head_changeset_id"]
        head = proposal.head_changeset_id
        if proposal.selected_ops:
            strategy = "cherry_pick"
            new_head = self._cherry_pick(principal, proposal, expected).id
        elif expected in self.git.ancestors(head):
            strategy, new_head = "fast_forward", head
        else:
            strategy = "merge_commit"
            new_head = self.git.commit_server(
                principal, project, proposal.target_ref, parents=(expected, head),
                message=f"merge proposal {proposal_id}",
                key=f"merge:{proposal_id}:{new_id(self.git.clock())}").id
        request = MergeRequest(project_id=project, ref_name=proposal.target_ref,
                               expected_head=expected, new_head=new_head,
                               proposal_id=proposal_id, reviewer_principal=reviewer)
        _, wire = mergeauth.build(request, proposal_digest=proposal.digest(),
                                  merger_principal=principal, strategy=strategy,
                                  ring=self.ring, now_ns=self.git.clock(), ttl_ns=ttl_ns)
        return {"ref_name": proposal.target_ref, "expected_head": expected,
                "new_head": new_head, "merge_proposal_id": proposal_id,
                "reviewer_principal": reviewer, "merge_authorization": wire,
                "strategy": strategy}

    def _picked(self, item: str) -> tuple[str, str | None, dict[str, Any]]:
        """What a faithful pick of ``<changeset>:<ordinal>`` must carry (ids re-derived)."""
        cid, _, ordinal = item.partition(":")
        op = self.git.load(cid).ops[int(ordinal)]
        if op.payload is None:
            raise Conflict(f"selected op {item[:80]!r} was erased", code="erased",
                           hint="open a new proposal without it")
        payload = {k: v for k, v in op.payload.items() if k not in ("memory_id", "event_id")}
        payload["cherrypicked_from"] = cid
        return op.op_type, op.target, payload

    def _cherry_pick(self, principal: str, proposal: Proposal, expected: str) -> Any:
        picked = [Op(op_type, target, payload)
                  for op_type, target, payload in (self._picked(item)
                                                   for item in proposal.selected_ops)]
        return self.git.commit_server(
            principal, proposal.project_id, proposal.target_ref, parents=(expected,),
            message=f"cherry-pick for proposal {proposal.proposal_id}",
            key=f"cherry-pick:{proposal.proposal_id}:{new_id(self.git.clock())}",
            ops=tuple(picked))

    def merge(self, principal: str, project: str, body: dict[str, Any]) -> dict[str, Any]:
        """As Lethe: verify the envelope, check the shape, then CAS + nonce atomically.

        Raises:
            InvalidInput: missing fields, malformed/expired/mismatched envelope (400).
            Forbidden: bad signature or unknown key, caller is not the signed merger,
                self-merge, or no approval by the named reviewer (403).
            Conflict: replayed nonce, stale expected head, bad shape (409).
        """
        self.git.access.require(principal, project, "write")
        for name in _MERGE_FIELDS:
            _str(body, name)
        request = MergeRequest(project_id=project, ref_name=body["ref_name"],
                               expected_head=body["expected_head"], new_head=body["new_head"],
                               proposal_id=body["merge_proposal_id"],
                               reviewer_principal=body["reviewer_principal"])
        ref = self.git.ref_or_404(project, check_ref_name(request.ref_name))
        if not ref["protected"]:
            raise InvalidInput("merges advance protected refs only; use refs/advance",
                               code="not-protected")
        envelope = mergeauth.verify(body["merge_authorization"], request, self.ring,
                                    self.git.clock())
        # Early answer for a plain replay; the atomic insert below still decides races.
        if self.git.store.nonce_consumed(envelope.nonce):
            raise Conflict("this merge authorization was already used",
                           code="authorization_replay", hint="ask for a new merge authorization")
        if envelope.merger_principal != principal:
            raise Forbidden("the authorization names another merger", code="merger-mismatch")
        doc = self.git.store.proposal(request.proposal_id)
        if doc is None or doc["project_id"] != project:
            raise hidden("proposal")
        proposal = _proposal(doc)
        if proposal.target_ref != request.ref_name:
            raise InvalidInput("the proposal targets another ref", code="ref-mismatch")
        if envelope.proposal_digest != proposal.digest():
            raise Forbidden("the authorization covers another proposal snapshot",
                            code="snapshot-mismatch")
        self._mergeable(principal, proposal, request.reviewer_principal)
        self._check_shape(proposal, envelope.strategy, request)
        now = self.git.now()
        after = review.merged(proposal, new_head=request.new_head, now=now)
        advance = {"advance_id": new_id(self.git.clock()), "project_id": project,
                   "ref_name": request.ref_name, "expected_head": request.expected_head,
                   "new_head": request.new_head, "merge_proposal_id": request.proposal_id,
                   "proposal_digest": envelope.proposal_digest,
                   "reviewer_principal": request.reviewer_principal,
                   "merger_principal": principal, "strategy": envelope.strategy,
                   "authorization_nonce": envelope.nonce, "created_at": now}
        # ONE transaction: nonce, CAS of the protected ref, ledger, proposal state, and the
        # projection of the merged changesets into records and the search index.
        with self.git.store.transaction():
            self.git.store.advance_protected(
                project=project, ref_name=request.ref_name, expected=request.expected_head,
                new=request.new_head, nonce=envelope.nonce, advance=advance,
                proposal=after.to_wire(), now=now)
            if request.ref_name == "refs/shared/main":
                self.git.accept(project, request.expected_head, request.new_head)
        return {"ref": self.git.ref_or_404(project, request.ref_name), "advance": advance,
                "proposal": after.to_wire()}

    def _check_shape(self, proposal: Proposal, strategy: str, request: MergeRequest) -> None:
        new = self.git.in_project(proposal.project_id, request.new_head)
        pinned = proposal.head_changeset_id
        if strategy == "fast_forward":
            ok = request.new_head == pinned and request.expected_head in self.git.ancestors(
                pinned)
        elif strategy == "merge_commit":
            ok = new.parent_ids == (request.expected_head, pinned) and not new.ops
        else:
            wanted = [self._picked(item) for item in proposal.selected_ops]
            ok = bool(wanted) and new.parent_ids == (request.expected_head,) and [
                _pick_identity(op) for op in new.ops] == wanted
        if not ok:
            raise Conflict(f"new_head does not have the {strategy} shape for this proposal",
                           code="merge-shape", hint="ask for a fresh merge authorization")


def _pick_identity(op: Op) -> tuple[str, str | None, dict[str, Any]]:
    return op.op_type, op.target, dict(op.payload or {})


__all__ = ["ReviewFlow"]
