"""Semantic diffs and conflict detection between Memory Git heads (memory-git.md §9) — pure.

Both work on values: the ops of changesets and the projections they produce
(:mod:`palimpsest.service.memorygit.projection`). Nothing here writes; persisting conflicts is the
service's job. Substantive conflicts are reported, never auto-resolved ("newest wins" is not a
resolution).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from palimpsest.service import history
from palimpsest.service.memorygit.ops import LOW_TRUST
from palimpsest.service.memorygit.projection import Projection
from palimpsest.service.model import Changeset
from palimpsest.text import lexical_tokens, to_lower, trim_space

SECTIONS = (
    "memories_added", "corrections_proposed", "records_superseded", "relationships_added",
    "decisions_changed", "tasks_or_flags_changed", "duplicates_detected",
    "permissions_or_visibility_affected", "evidence_added_or_removed", "unresolved_conflicts",
    "kind_notes",
)
_BREADTH = {"private": 0, "internal": 1, "shared": 2, "public": 3}
# Conflicts that block a merge until someone resolves them (stale base is solved by merging).
BLOCKING = frozenset({"contradicts_protected_decision", "lower_trust_replacement",
                      "private_to_broader_flow", "incompatible_facts"})


def _norm(text: Any) -> str:
    return " ".join(lexical_tokens(to_lower(trim_space(str(text or "")))))


def semantic_diff(base: Projection, changesets: Iterable[Changeset],
                  conflicts: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """``SemanticDiff`` of ``changesets`` (those not reachable from the base) over ``base``."""
    out: dict[str, list[Any]] = {name: [] for name in SECTIONS}
    known = {_norm(m.fields.get("content")): m.memory_id for m in base.memories.values()
             if m.status == "active"}
    for cs in changesets:
        for ordinal, op in enumerate(cs.ops):
            payload = dict(op.payload or {})
            entry = {"changeset_id": cs.id, "ordinal": ordinal, "op_type": op.op_type}
            if op.erased:
                entry["erased"] = True
            if op.target:
                entry["target_event_id"] = op.target
            if op.result:
                entry["memory_id"] = op.result
            if "summary" in payload:
                entry["summary"] = payload["summary"]
            kind = payload.get("kind")
            if op.op_type == "add_memory":
                out["memories_added"].append(entry)
                same = known.get(_norm(payload.get("content")))
                if same is not None:
                    out["duplicates_detected"].append({**entry, "duplicate_of": same})
            elif op.op_type == "correct_memory":
                out["corrections_proposed"].append(entry)
                out["kind_notes"].append({**entry, "diff_kind": "temporal_update"})
            elif op.op_type == "supersede_memory":
                out["records_superseded"].append(entry)
                out["kind_notes"].append({**entry, "diff_kind": "temporal_update"})
            elif op.op_type == "add_relationship":
                out["relationships_added"].append(entry)
            elif op.op_type == "mark_duplicate":
                out["duplicates_detected"].append(entry)
            elif op.op_type in ("attach_evidence", "attach_verification"):
                out["evidence_added_or_removed"].append(entry)
            elif op.op_type == "propose_deprecation":
                out["kind_notes"].append({**entry, "diff_kind": "deprecation_proposed"})
            if kind == "decision" or _target_kind(base, op.target) == "decision":
                out["decisions_changed"].append(entry)
            if kind in ("task", "flag"):
                out["tasks_or_flags_changed"].append(entry)
            if "to_visibility" in payload or ("visibility" in payload and op.target):
                out["permissions_or_visibility_affected"].append(entry)
    out["unresolved_conflicts"] = list(conflicts or [])
    return out


def _target_kind(state: Projection, target: str | None) -> str | None:
    found = state.memories.get(target) if target else None
    return str(found.fields.get("kind")) if found is not None else None


def conflict_id(project: str, base: str | None, left: str, right: str, *, kind: str,
                identity: str) -> str:
    """Deterministic id: SHA-256 over project, base, left, right, type and identity (§9)."""
    doc = [project, base or "", left, right, kind, identity]
    return history.digest(doc)


def detect(project: str, *, base_id: str | None, left_id: str, right_id: str,
           left: Projection, right_changesets: Iterable[Changeset],
           left_is_ancestor: bool) -> list[dict[str, Any]]:
    """Conflicts of merging the ops of ``right_changesets`` (not in the base) into ``left``.

    ``left`` is the target (accepted) projection, ``left_is_ancestor`` whether the merge would
    be a fast-forward. Returns ``MemoryConflict`` bodies without timestamps or status.
    """
    found: dict[str, dict[str, Any]] = {}

    def add(kind: str, severity: str, summary: str, identity: str, **details: Any) -> None:
        cid = conflict_id(project, base_id, left_id, right_id, kind=kind, identity=identity)
        found.setdefault(cid, {
            "conflict_id": cid, "project_id": project, "base_changeset_id": base_id,
            "left_changeset_id": left_id, "right_changeset_id": right_id,
            "conflict_type": kind, "severity": severity, "summary": summary,
            "details": details,
        })

    if not left_is_ancestor:
        add("stale_base", "warning", "the target moved since the branch was made (not a "
            "fast-forward); a merge commit is needed", "stale_base")
    active = {m.memory_id: m for m in left.memories.values() if m.status == "active"}
    by_content = {_norm(m.fields.get("content")): m.memory_id for m in active.values()}
    by_fact = {(m.payload.get("fact_key"), m.fields.get("scope")): m for m in active.values()
               if m.payload.get("fact_key")}
    for cs in right_changesets:
        for ordinal, op in enumerate(cs.ops):
            payload = dict(op.payload or {})
            ident = f"{cs.id}:{ordinal}"
            target = left.memories.get(op.target or "")
            if op.op_type == "add_memory":
                same = by_content.get(_norm(payload.get("content")))
                if same is not None:
                    add("duplicate_content", "warning", "adds content already accepted",
                        ident, memory_id=same)
                fact = by_fact.get((payload.get("fact_key"), payload.get("scope")))
                if fact is not None and _norm(fact.fields.get("content")) != _norm(
                        payload.get("content")):
                    add("incompatible_facts", "blocking", "states a different value for an "
                        "accepted fact in the same scope", ident, memory_id=fact.memory_id)
            if target is not None and op.op_type in (
                    "correct_memory", "supersede_memory", "propose_deprecation",
                    "mark_duplicate") and target.fields.get("kind") == "decision" and (
                    target.payload.get("protected") is True):
                add("contradicts_protected_decision", "blocking", "changes a protected "
                    "decision", ident, memory_id=target.memory_id)
            if (target is not None and op.op_type == "supersede_memory"
                    and payload.get("source_trust") in LOW_TRUST
                    and target.trust == "user_approved"):
                add("lower_trust_replacement", "blocking", "an inference replaces "
                    "user-approved memory", ident, memory_id=target.memory_id)
            before = payload.get("from_visibility") or (
                target.fields.get("visibility") if target is not None else None)
            after = payload.get("to_visibility") or payload.get("visibility")
            if (before == "private" and after in _BREADTH
                    and _BREADTH[str(after)] > _BREADTH["private"]):
                add("private_to_broader_flow", "blocking", "moves private memory to a broader "
                    "audience", ident, from_visibility=before, to_visibility=after)
    return sorted(found.values(), key=lambda c: (c["conflict_type"], c["conflict_id"]))


__all__ = ["BLOCKING", "SECTIONS", "conflict_id", "detect", "semantic_diff"]
