"""Lifecycle, applicability, evidence and trust over a verified memory set (§12–§15).

Pure: :func:`project` takes verified memories, a :class:`Probe` answering read-only repository
questions, and the policy context of the query commit; it returns a :class:`Projection` value.
Input order never matters: memories are de-duplicated and sorted by ID first, and timestamps or
arrival order never choose a winner.

The five judgments stay separate (requirements 000, "Lifecycle and the five independent
judgments"): signature validity is a precondition (only verified memories arrive here);
lifecycle, applicability, evidence and trust are independent columns of a row; semantic truth
and prompt authority are not computed anywhere.

Wire builders at the end turn rows into dicts in upstream key order.  Projection and show write
empty lists as ``[]``; the index and recall outputs write some of them as ``null`` (§16.6,
§19.3) — :func:`row_wire` takes the set of list names to write as ``null`` when empty.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from palimpsest.hn.envelope import ABSENT, Anchor, Record, VerifiedMemory, anchor_wire, record_wire
from palimpsest.hn.policy import PolicyContext

LIFECYCLES = ("active", "superseded", "retracted", "branching", "dependency-missing")
APPLICABILITY = ("applicable", "inapplicable", "anchor-missing", "anchor-invalid")


class Probe(Protocol):
    """Read-only questions about the repository (implemented by ``store.RepoProbe``)."""

    def commit_state(self, hexid: str) -> str:
        """``commit``, ``missing`` or ``not-commit``."""

    def path_entry(self, commit: str, path: str) -> tuple[str, str] | None:
        """``(type, object ID)`` of a path in a commit's tree, or None when absent."""

    def parents(self, commit: str) -> tuple[str, ...] | None:
        """Parent IDs of a commit, or None when it is missing."""

    def object_state(self, hexid: str) -> str:
        """``present``, ``missing`` or ``error``."""

    def has_event(self, event_id: str) -> bool:
        """Whether an accepted collaboration event with this ID exists."""


@dataclass(frozen=True, slots=True)
class Relationship:
    """A valid lifecycle edge from ``memory_id`` to ``target_id``."""

    memory_id: str
    stream: str
    actor: str
    operation: str
    target_id: str


@dataclass(frozen=True, slots=True)
class MissingDependency:
    """Something a memory names that is not available (§12–§14)."""

    kind: str
    owner_id: str
    stream: str
    operation: str
    missing_id: str
    reason: str


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """A relationship that was not accepted as an edge, with its reason code."""

    memory_id: str
    code: str
    target_id: str


@dataclass(frozen=True, slots=True)
class EvidenceDetail:
    """Resolution of one evidence ID (§14)."""

    type: str
    requested: str
    owner_id: str
    status: str
    reason: str


@dataclass(frozen=True, slots=True)
class Row:
    """The projection of one record or supersede envelope."""

    id: str
    stream: str
    actor: str
    operation: str
    timestamp: str
    kind: str
    content_digest: str
    anchor: Anchor
    lifecycle: str
    challengers: tuple[str, ...]
    successors: tuple[str, ...]
    retractions: tuple[str, ...]
    applicability: str
    evidence: str
    evidence_details: tuple[EvidenceDetail, ...]
    trust: str
    record: Record
    # This row's own missing dependencies, sorted as the index orders them (§19.3).
    dependencies: tuple[MissingDependency, ...] = ()


@dataclass(frozen=True, slots=True)
class Projection:
    """Rows, edges, missing dependencies and diagnostics at one query context."""

    policy_commit: str
    policy_digest: str
    rows: tuple[Row, ...]
    relationships: tuple[Relationship, ...]
    missing_dependencies: tuple[MissingDependency, ...]
    diagnostics: tuple[Diagnostic, ...]
    _by_id: dict[str, Row] = field(default_factory=dict, compare=False, repr=False)

    def row(self, memory_id: str) -> Row | None:
        """The row of a record/supersede memory, or None."""
        return self._by_id.get(memory_id)


class _Ancestry:
    """Memoised ancestry of query commits, walking exact parent objects (safe when shallow)."""

    def __init__(self, probe: Probe) -> None:
        self._probe = probe
        self._cache: dict[str, tuple[frozenset[str], tuple[str, ...]]] = {}

    def of(self, start: str) -> tuple[frozenset[str], tuple[str, ...]]:
        cached = self._cache.get(start)
        if cached is not None:
            return cached
        seen = {start}
        missing: set[str] = set()
        stack = [start]
        while stack:
            current = stack.pop()
            parents = self._probe.parents(current)
            if parents is None:
                missing.add(current)
                continue
            for parent in parents:
                if parent not in seen:
                    seen.add(parent)
                    stack.append(parent)
        result = (frozenset(seen - missing), tuple(sorted(missing)))
        self._cache[start] = result
        return result


def _dep(owner: VerifiedMemory, kind: str, missing: str, reason: str) -> MissingDependency:
    env = owner.envelope
    return MissingDependency(kind, owner.memory_id, env.stream, env.operation, missing, reason)


def _applicability(  # noqa: PLR0917 - internal helper with one call site
    memory: VerifiedMemory,
    record: Record,
    probe: Probe,
    ancestry: _Ancestry,
    commit_states: dict[str, str],
    at_commit: str | None,
    subject: str,
    path: str,
) -> tuple[str, list[MissingDependency]]:
    def state(commit: str) -> str:
        known = commit_states.get(commit)
        if known is None:
            known = commit_states[commit] = probe.commit_state(commit)
        return known

    anchor = record.anchor
    anchor_state = state(anchor.commit)
    if anchor_state == "missing":
        dep = _dep(memory, "anchor-commit", anchor.commit, "anchor-commit-unavailable")
        return "anchor-missing", [dep]
    if anchor_state != "commit":
        return "anchor-invalid", []
    for item in anchor.paths:
        entry = probe.path_entry(anchor.commit, item.path)
        if item.blob == ABSENT:
            if entry is not None:
                return "anchor-invalid", []
        elif entry != ("blob", item.blob):
            return "anchor-invalid", []
    requested = at_commit or anchor.commit
    if requested != anchor.commit:
        query_state = state(requested)
        if query_state == "missing":
            dep = _dep(memory, "query-commit", requested, "query-commit-unavailable")
            return "anchor-missing", [dep]
        if query_state != "commit":
            return "anchor-invalid", []
    mode = record.applicability.mode
    if mode == "exact":
        result = "applicable" if requested == anchor.commit else "inapplicable"
    elif mode == "descendants":
        if requested == anchor.commit:
            result = "applicable"
        else:
            reachable, missing = ancestry.of(requested)
            if anchor.commit in reachable:
                result = "applicable"
            elif missing:
                dep = _dep(memory, "anchor-ancestry", missing[0], "ancestry-commit-unavailable")
                return "anchor-missing", [dep]
            else:
                result = "inapplicable"
    else:
        wanted = record.applicability.subject
        ok = bool(subject) and subject == wanted and subject == anchor.subject
        result = "applicable" if ok else "inapplicable"
    if result == "applicable":
        if subject and mode != "subject" and subject != anchor.subject:
            result = "inapplicable"
        if path and all(item.path != path for item in anchor.paths):
            result = "inapplicable"
    return result, []


def _evidence(
    memory: VerifiedMemory, record: Record, probe: Probe, known_ids: set[str] | frozenset[str]
) -> tuple[str, tuple[EvidenceDetail, ...], list[MissingDependency]]:
    details: list[EvidenceDetail] = []
    deps: list[MissingDependency] = []
    owner = memory.memory_id
    for item in record.evidence:
        kind, _, requested = item.partition(":")
        if kind == "git":
            state = probe.object_state(requested)
            status, reason = {
                "present": ("resolved", "exact-object"),
                "missing": ("missing", "object-unavailable"),
            }.get(state, ("invalid", "object-inspection-failed"))
        elif kind == "event":
            status, reason = (
                ("resolved", "accepted-event")
                if probe.has_event(requested)
                else ("missing", "event-unavailable")
            )
        elif kind == "memory":
            status, reason = (
                ("resolved", "accepted-memory")
                if requested in known_ids
                else ("missing", "memory-unavailable")
            )
        else:
            status, reason = "invalid", "malformed-id"
        details.append(EvidenceDetail(kind, requested, owner, status, reason))
        if status == "missing":
            deps.append(_dep(memory, f"evidence-{kind}", requested, reason))
    details.sort(key=lambda d: (d.type, d.requested, d.owner_id))
    statuses = {d.status for d in details}
    overall = "resolved"
    if "invalid" in statuses:
        overall = "invalid"
    elif "missing" in statuses:
        overall = "missing"
    return overall, tuple(details), deps


def _dependency_key(d: MissingDependency) -> tuple[str, ...]:
    return (d.missing_id, d.kind, d.operation, d.owner_id, d.stream, d.reason)


def project(
    memories: Iterable[VerifiedMemory],
    probe: Probe,
    *,
    at_commit: str | None,
    policy: PolicyContext,
    subject: str | None = None,
    path: str | None = None,
) -> Projection:
    """Project a verified memory set at one query context (§12–§15).

    ``at_commit`` is the query commit (None: each row's own anchor commit); ``subject`` and
    ``path`` narrow applicability as recall's ``--subject``/``--path`` do (None or "": no
    narrowing).
    """
    subject = subject or ""
    path = path or ""
    by_id: dict[str, VerifiedMemory] = {}
    for memory in memories:
        seen = by_id.get(memory.memory_id)
        if seen is None or memory.commit < seen.commit:
            by_id[memory.memory_id] = memory
    ordered = [by_id[k] for k in sorted(by_id)]
    known = frozenset(by_id)

    relationships: list[Relationship] = []
    missing: list[MissingDependency] = []
    diagnostics: list[Diagnostic] = []
    successors: dict[str, list[str]] = {}
    retractions: dict[str, list[str]] = {}
    challengers: dict[str, list[str]] = {}
    missing_target: set[str] = set()
    for memory in ordered:
        env = memory.envelope
        if env.operation == "record":
            continue
        target_id = env.target
        if not target_id:
            diagnostics.append(Diagnostic(memory.memory_id, "malformed-relationship", ""))
            continue
        if target_id == memory.memory_id:
            diagnostics.append(Diagnostic(memory.memory_id, "self-target", target_id))
            continue
        target = by_id.get(target_id)
        if target is None:
            missing.append(_dep(memory, "lifecycle-target", target_id, "target-unavailable"))
            missing_target.add(memory.memory_id)
            continue
        if target.envelope.operation not in ("record", "supersede"):
            diagnostics.append(Diagnostic(memory.memory_id, "wrong-target-kind", target_id))
            continue
        if env.operation in ("supersede", "retract") and env.actor != target.envelope.actor:
            diagnostics.append(Diagnostic(memory.memory_id, "actor-mismatch", target_id))
            continue
        relationships.append(
            Relationship(memory.memory_id, env.stream, env.actor, env.operation, target_id)
        )
        bucket = {"supersede": successors, "retract": retractions, "challenge": challengers}
        bucket[env.operation].setdefault(target_id, []).append(memory.memory_id)

    rows: list[Row] = []
    ancestry = _Ancestry(probe)
    commit_states: dict[str, str] = {}
    for memory in ordered:
        env = memory.envelope
        record = env.record
        if env.operation not in ("record", "supersede") or record is None:
            continue
        mid = memory.memory_id
        succ = tuple(sorted(successors.get(mid, ())))
        retr = tuple(sorted(retractions.get(mid, ())))
        if env.operation == "supersede" and mid in missing_target:
            lifecycle = "dependency-missing"
        elif retr:
            lifecycle = "retracted"
        elif len(succ) > 1:
            lifecycle = "branching"
        elif succ:
            lifecycle = "superseded"
        else:
            lifecycle = "active"
        applicability, app_deps = _applicability(
            memory, record, probe, ancestry, commit_states, at_commit, subject, path
        )
        evidence, details, ev_deps = _evidence(memory, record, probe, known)
        own_deps = app_deps + ev_deps
        missing.extend(own_deps)
        own_deps += [d for d in missing if d.owner_id == mid and d.kind == "lifecycle-target"]
        rows.append(
            Row(
                id=mid,
                stream=env.stream,
                actor=env.actor,
                operation=env.operation,
                timestamp=env.timestamp,
                kind=record.kind,
                content_digest="sha256:" + hashlib.sha256(record.content.encode()).hexdigest(),
                anchor=record.anchor,
                lifecycle=lifecycle,
                challengers=tuple(sorted(challengers.get(mid, ()))),
                successors=succ,
                retractions=retr,
                applicability=applicability,
                evidence=evidence,
                evidence_details=details,
                trust=policy.trust(env.actor, record.kind),
                record=record,
                dependencies=tuple(sorted(set(own_deps), key=_dependency_key)),
            )
        )
    relationships.sort(key=lambda r: (r.target_id, r.operation, r.memory_id))
    unique_missing = sorted(
        set(missing), key=lambda d: (d.missing_id, d.owner_id, d.kind, d.operation)
    )
    diagnostics.sort(key=lambda d: (d.memory_id, d.code))
    return Projection(
        policy_commit=policy.commit,
        policy_digest=policy.digest,
        rows=tuple(rows),
        relationships=tuple(relationships),
        missing_dependencies=tuple(unique_missing),
        diagnostics=tuple(diagnostics),
        _by_id={row.id: row for row in rows},
    )


# ------------------------------------------------------------------------- wire builders

ROW_LISTS = frozenset(("challengers", "successors", "retractions", "evidenceDetails"))


def evidence_detail_wire(detail: EvidenceDetail) -> dict[str, Any]:
    """``{type, requested, ownerId, status, reason}``."""
    return {
        "type": detail.type,
        "requested": detail.requested,
        "ownerId": detail.owner_id,
        "status": detail.status,
        "reason": detail.reason,
    }


def dependency_wire(dep: MissingDependency) -> dict[str, Any]:
    """``{kind, ownerId, stream, operation, missingId, reason}``."""
    return {
        "kind": dep.kind,
        "ownerId": dep.owner_id,
        "stream": dep.stream,
        "operation": dep.operation,
        "missingId": dep.missing_id,
        "reason": dep.reason,
    }


def relationship_wire(rel: Relationship) -> dict[str, Any]:
    """``{memoryId, stream, actor, operation, targetId}``."""
    return {
        "memoryId": rel.memory_id,
        "stream": rel.stream,
        "actor": rel.actor,
        "operation": rel.operation,
        "targetId": rel.target_id,
    }


def diagnostic_wire(diag: Diagnostic) -> dict[str, Any]:
    """``{memoryId, code, targetId}`` (targetId omitted when empty)."""
    out: dict[str, Any] = {"memoryId": diag.memory_id, "code": diag.code}
    if diag.target_id:
        out["targetId"] = diag.target_id
    return out


def _list(values: list[Any], name: str, nil_empty: frozenset[str]) -> list[Any] | None:
    return None if (not values and name in nil_empty) else values


def row_parts(
    row: Row, *, nil_empty: frozenset[str] = frozenset(), sort_data_evidence: bool = False
) -> dict[str, Any]:
    """Every row field as wire values keyed by wire name (for callers composing other orders,
    such as the index record of §19.3 which inserts ``signedTimestamp`` and ``dependencies``).

    ``nil_empty`` names lists written as ``null`` when empty: any of ``challengers``,
    ``successors``, ``retractions``, ``evidenceDetails``, ``dependencies``, ``data.evidence``.
    """
    return {
        "id": row.id,
        "stream": row.stream,
        "actor": row.actor,
        "signedTimestamp": row.timestamp,
        "kind": row.kind,
        "contentDigest": row.content_digest,
        "anchor": anchor_wire(row.anchor),
        "signature": "valid",
        "lifecycle": row.lifecycle,
        "challengers": _list(list(row.challengers), "challengers", nil_empty),
        "successors": _list(list(row.successors), "successors", nil_empty),
        "retractions": _list(list(row.retractions), "retractions", nil_empty),
        "applicability": row.applicability,
        "evidence": row.evidence,
        "evidenceDetails": _list(
            [evidence_detail_wire(d) for d in row.evidence_details], "evidenceDetails", nil_empty
        ),
        "dependencies": _list(
            [dependency_wire(d) for d in row.dependencies], "dependencies", nil_empty
        ),
        "trust": row.trust,
        "data": record_wire(
            row.record,
            sort_evidence=sort_data_evidence,
            nil_empty_evidence="data.evidence" in nil_empty,
        ),
    }


_ROW_ORDER = (
    "id", "stream", "actor", "kind", "contentDigest", "anchor", "signature", "lifecycle",
    "challengers", "successors", "retractions", "applicability", "evidence", "evidenceDetails",
    "trust", "data",
)  # fmt: skip


def row_wire(
    row: Row, *, nil_empty: frozenset[str] = frozenset(), sort_data_evidence: bool = False
) -> dict[str, Any]:
    """A projection row in §12 key order (as in projection-head.json and show output)."""
    parts = row_parts(row, nil_empty=nil_empty, sort_data_evidence=sort_data_evidence)
    return {key: parts[key] for key in _ROW_ORDER}


def projection_wire(projection: Projection) -> dict[str, Any]:
    """The whole projection in §12 key order, empty lists as ``[]``."""
    out: dict[str, Any] = {"policyCommit": projection.policy_commit}
    if projection.policy_digest:
        out["policyDigest"] = projection.policy_digest
    out["rows"] = [row_wire(r) for r in projection.rows]
    out["relationships"] = [relationship_wire(r) for r in projection.relationships]
    out["missingDependencies"] = [dependency_wire(d) for d in projection.missing_dependencies]
    out["diagnostics"] = [diagnostic_wire(d) for d in projection.diagnostics]
    return out


__all__ = [
    "APPLICABILITY",
    "LIFECYCLES",
    "Diagnostic",
    "EvidenceDetail",
    "MissingDependency",
    "Probe",
    "Projection",
    "Relationship",
    "Row",
    "dependency_wire",
    "diagnostic_wire",
    "evidence_detail_wire",
    "project",
    "projection_wire",
    "relationship_wire",
    "row_parts",
    "row_wire",
]
