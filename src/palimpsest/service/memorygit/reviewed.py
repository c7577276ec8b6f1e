"""Reviewed memories: a memory that requires review takes agents' writes as proposals.

When a memory's Memory Git settings say ``review_required``, an agent's write does not change
accepted memory. :meth:`ReviewedWrites.write` turns the UHP-shaped write (``type``, ``title``,
``content``, ``attributes``) into one ``add_memory`` op, commits it with compare-and-swap to the
agent's own ``refs/agents/<member>/main`` (created from ``refs/shared/main`` when missing), and
opens a proposal into ``refs/shared/main``. A person (or another agent) then reviews and merges
it through the ordinary flow. Readers get accepted memory (the shared ref) by default; the
author reads its own pending ref on request (``context?ref=refs/agents/<me>/main``).

Extension fields (documented in docs/memory-git.md):

- settings ``{"review_required": bool, "reviewed_types": ["agent"]}`` at
  ``GET/PUT /api/memory/{project}/settings`` (changing them needs ``delete`` on the memory);
- the answer to a gated write is **202** ``{"object": "memory.pending_review", …}``.
"""

from __future__ import annotations

from typing import Any

from palimpsest.errors import Conflict, InvalidInput
from palimpsest.service.memorygit.flow import ReviewFlow
from palimpsest.service.memorygit.repository import SHARED_MAIN, member_of

# UHP record types → Memory Git kinds (memory-git.md §4 closes the kind vocabulary).
_KINDS = {"fact": "fact", "note": "observation", "episode": "observation",
          "procedure": "record", "entity": "record", "link": "record"}
MAX_TEXT = 16 * 1024


class ReviewedWrites:
    """Settings and the gate for memories that require review."""

    def __init__(self, flow: ReviewFlow) -> None:
        """Gate writes over ``flow``'s service and store."""
        self.flow = flow

    def settings(self, principal: str, project: str) -> dict[str, Any]:
        """The memory's review settings (read privilege)."""
        self.flow.git.access.require(principal, project, "read")
        doc = self.flow.git.store.settings(project)
        return {"project_id": project, "review_required": bool(doc.get("review_required")),
                "reviewed_types": list(doc.get("reviewed_types", ["agent"]))}

    def put_settings(self, principal: str, project: str, body: dict[str, Any]) -> dict[str, Any]:
        """Turn review on or off (needs ``delete``: the same privilege as changing grants)."""
        self.flow.git.access.require(principal, project, "delete")
        required = body.get("review_required")
        types = body.get("reviewed_types", ["agent"])
        if not isinstance(required, bool):
            raise InvalidInput("review_required must be true or false", code="invalid-settings")
        if not isinstance(types, list) or not set(types) <= {"agent", "human"} or not types:
            raise InvalidInput("reviewed_types must list agent and/or human",
                               code="invalid-settings")
        self.flow.git.store.put_settings(project, {"review_required": required,
                                                   "reviewed_types": sorted(set(types))})
        if required and self.flow.git.store.ref(project, SHARED_MAIN) is None:
            self.flow.git.init(principal, project)
        return self.settings(principal, project)

    def requires_review(self, project: str, member_type: str) -> bool:
        """Whether a write by a member of ``member_type`` must go through review here."""
        doc = self.flow.git.store.settings(project)
        return bool(doc.get("review_required")) and member_type in doc.get(
            "reviewed_types", ["agent"])

    def pending(self, principal: str, project: str, query: str, limit: int) -> dict[str, Any]:
        """The caller's own memories not yet accepted: its ``refs/agents/<member>/main``
        beyond what ``refs/shared/main`` holds (read privilege)."""
        git = self.flow.git
        git.access.require(principal, project, "read")
        ref = f"refs/agents/{member_of(principal)}/main"
        out: dict[str, Any] = {"ref_name": ref, "status": "pending_review",
                               "head_changeset_id": None, "memories": []}
        own = git.store.ref(project, ref)
        if own is None or own["created_by_principal"] != principal or not own[
                "head_changeset_id"]:
            return out
        shared = git.store.ref(project, SHARED_MAIN)
        accepted = git.ancestors(shared["head_changeset_id"] if shared else None)
        context = git.context_at(principal, project, {"ref_name": ref, "query": query,
                                                      "limit": max(1, min(limit, 100))})
        out["head_changeset_id"] = context["head_changeset_id"]
        out["memories"] = [m for m in context["memories"]
                           if m["introduced_changeset_id"] not in accepted]
        return out

    def write(self, principal: str, project: str, body: dict[str, Any], *,
              idempotency_key: str) -> dict[str, Any]:
        """Commit a UHP-shaped write to the caller's own ref and open a proposal.

        Raises:
            InvalidInput: an empty write or unsupported fields. Conflict: review is not
            required here (write through the UHP route instead).
        """
        if not self.flow.git.store.settings(project).get("review_required"):
            raise Conflict("this memory does not require review; write through "
                           "/v1/memories/{id}/records", code="review-not-required")
        payload = _payload(body)
        member = member_of(principal)
        if not member:
            raise InvalidInput("only members write memories", code="invalid-principal")
        ref = f"refs/agents/{member}/main"
        git = self.flow.git
        key = f"uhp:{idempotency_key}"
        prior = git.store.changeset_by_key(project, principal, key)
        if prior is not None:  # a retry: same write → the same answer; else fail closed
            git.access.require(principal, project, "write")
            done = git.load(prior[0])
            proposal_key = git.store.proposal_by_key(project, principal, key)
            if dict(done.ops[0].payload or {}) != payload or proposal_key is None:
                raise Conflict("this Idempotency-Key was used for a different write",
                               code="idempotency_mismatch", hint="use a new Idempotency-Key")
            return _pending(project, ref, done.to_wire(), proposal_key[0])
        if git.store.ref(project, ref) is None:
            shared = git.ref_or_404(project, SHARED_MAIN)["head_changeset_id"]
            git.create_branch(principal, project, {"ref_name": ref,
                                                   "head_changeset_id": shared})
        head = git.ref_or_404(project, ref)["head_changeset_id"]
        changeset, _ = git.create_changeset(principal, {
            "project_id": project, "ref_name": ref, "expected_head": head,
            "idempotency_key": key, "message": "reviewed write",
            "ops": [{"op_type": "add_memory", "payload": payload}]})
        # One open proposal per pending branch: the new one (pinned at the new head) replaces
        # the older ones, which are canceled with their reviews kept — an approval of the old
        # head never covers the amended branch.
        for older in self.flow.list_proposals(principal, project):
            if (older["source_ref"] == ref and older["originator_principal"] == principal
                    and older["status"] in ("open", "approved")):
                self.flow.cancel(principal, older["proposal_id"])
        proposal, _ = self.flow.propose(principal, project, {
            "source_ref": ref, "target_ref": SHARED_MAIN,
            "head_changeset_id": changeset["changeset_id"],
            "idempotency_key": key, "message": "reviewed write"})  # no content outside the op
        return _pending(project, ref, changeset, proposal["proposal_id"])


def _pending(project: str, ref: str, changeset: dict[str, Any],
             proposal_id: str) -> dict[str, Any]:
    return {"object": "memory.pending_review", "status": "pending_review",
            "memory_id": changeset["ops"][0]["resulting_event_id"], "project_id": project,
            "ref_name": ref, "changeset_id": changeset["changeset_id"],
            "proposal_id": proposal_id, "target_ref": SHARED_MAIN}


def _payload(body: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(body) - {"type", "title", "content", "attributes", "references",
                                  "time"})
    if unknown:
        raise InvalidInput(f"field {unknown[0]!r} is not supported in a reviewed write",
                           code="unknown-field")
    if body.get("references"):
        raise InvalidInput("references are not supported in a reviewed write yet; add them "
                           "after the review with an add_relationship op", code="unknown-field")
    when = body.get("time") or {}
    if not isinstance(when, dict):
        raise InvalidInput("time must be an object", code="invalid-content")
    content = body.get("content", "")
    if isinstance(content, list):
        texts = [p.get("text", "") for p in content if isinstance(p, dict)]
        if len(texts) != len(content) or not all(isinstance(t, str) for t in texts):
            raise InvalidInput("content parts must be text parts", code="invalid-content")
        content = "\n".join(t for t in texts if t)
    title = body.get("title")
    if not isinstance(content, str) or (title is not None and not isinstance(title, str)):
        raise InvalidInput("content and title must be text", code="invalid-content")
    text = "\n".join(x for x in (title or "", content) if x)
    if not text.strip():
        raise InvalidInput("a write needs a title or content", code="invalid-content")
    if len(text.encode("utf-8")) > MAX_TEXT:
        raise InvalidInput(f"content exceeds {MAX_TEXT} bytes", code="too-large")
    payload: dict[str, Any] = {"content": text,
                               "kind": _KINDS.get(str(body.get("type", "note")), "record")}
    if title:
        payload["summary"] = title[:4096]
    for name in ("valid_from", "valid_to"):
        if isinstance(when.get(name), str) and when[name]:
            payload[name] = when[name]
    attributes = body.get("attributes") or {}
    if not isinstance(attributes, dict):
        raise InvalidInput("attributes must be an object", code="invalid-content")
    # Scalar attributes travel as ``name=value`` tags (booleans as JSON spells them), so
    # ``standing: true`` becomes ops.STANDING_TAG and the merged record stands in the prime.
    tags = [f"{k}={str(v).lower() if isinstance(v, bool) else v}"
            for k, v in sorted(attributes.items()) if isinstance(v, str | int | bool)]
    if tags:
        payload["tags"] = [t[:128] for t in tags[:64]]
    return payload


__all__ = ["ReviewedWrites"]
