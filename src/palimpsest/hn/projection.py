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
from collections.abc import Container, Iterable
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
    """Something a memory names that is not available (§12–§14).

    ``operation`` is the owner's operation on ``lifecycle-target`` dependencies and "" on
    anchor, query-commit and evidence dependencies (upstream omits it there)."""

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


def _dep(
    owner: VerifiedMemory, kind: str, missing: str, reason: str, operation: str = ""
) -> MissingDependency:
    # Upstream names the owner's operation only on lifecycle-target dependencies; anchor and
    # evidence dependencies of a row leave it out (omitempty).
    return MissingDependency(kind, owner.memory_id, owner.envelope.stream, operation, missing,
                             reason)  # fmt: skip


# ------------------------------------------------------------------------- relationships


@dataclass(frozen=True, slots=True)
class Stub:
    """What the relationship pass needs of one verified envelope (not its record)."""

    memory_id: str
    stream: str
    actor: str
    operation: str
    target: str


def stub(memory: VerifiedMemory) -> Stub:
    """The relationship fields of a verified memory."""
    env = memory.envelope
    return Stub(memory.memory_id, env.stream, env.actor, env.operation, env.target)


@dataclass(frozen=True, slots=True)
class Relations:
    """The relationship pass over a verified set (§12): edges, lifecycle-target dependencies
    and diagnostics, plus the edge lists of each target."""

    relationships: tuple[Relationship, ...]
    missing: tuple[MissingDependency, ...]  # lifecycle-target, in ID order of their owners
    diagnostics: tuple[Diagnostic, ...]
    successors: dict[str, tuple[str, ...]]
    retractions: dict[str, tuple[str, ...]]
    challengers: dict[str, tuple[str, ...]]
    owned: dict[str, tuple[MissingDependency, ...]]  # lifecycle-target deps by owner

    def lifecycle(self, memory_id: str, operation: str) -> str:
        """The lifecycle of a record/supersede row, first match wins (§12)."""
        if operation == "supersede" and memory_id in self.owned:
            return "dependency-missing"
        if memory_id in self.retractions:
            return "retracted"
        successors = self.successors.get(memory_id, ())
        if len(successors) > 1:
            return "branching"
        return "superseded" if successors else "active"


def relate(stubs: Iterable[Stub]) -> Relations:
    """Examine every envelope that is not a ``record`` in ID order (§12).  Input order never
    matters; duplicates (one memory reached from several refs) count once."""
    by_id = {s.memory_id: s for s in stubs}
    relationships: list[Relationship] = []
    missing: list[MissingDependency] = []
    diagnostics: list[Diagnostic] = []
    buckets: dict[str, dict[str, list[str]]] = {
        "supersede": {}, "retract": {}, "challenge": {}
    }  # fmt: skip
    owned: dict[str, tuple[MissingDependency, ...]] = {}
    for mid in sorted(by_id):
        env = by_id[mid]
        if env.operation == "record":
            continue
        target_id = env.target
        if not target_id:
            diagnostics.append(Diagnostic(mid, "malformed-relationship", ""))
            continue
        if target_id == mid:
            diagnostics.append(Diagnostic(mid, "self-target", target_id))
            continue
        target = by_id.get(target_id)
        if target is None:
            dep = MissingDependency("lifecycle-target", mid, env.stream, env.operation,
                                    target_id, "target-unavailable")  # fmt: skip
            missing.append(dep)
            owned[mid] = (dep,)
            continue
        if target.operation not in ("record", "supersede"):
            diagnostics.append(Diagnostic(mid, "wrong-target-kind", target_id))
            continue
        if env.operation in ("supersede", "retract") and env.actor != target.actor:
            diagnostics.append(Diagnostic(mid, "actor-mismatch", target_id))
            continue
        relationships.append(Relationship(mid, env.stream, env.actor, env.operation, target_id))
        buckets[env.operation].setdefault(target_id, []).append(mid)
    relationships.sort(key=lambda r: (r.target_id, r.operation, r.memory_id))
    diagnostics.sort(key=lambda d: (d.memory_id, d.code))

    def frozen(bucket: dict[str, list[str]]) -> dict[str, tuple[str, ...]]:
        return {target: tuple(sorted(ids)) for target, ids in bucket.items()}

    return Relations(
        relationships=tuple(relationships),
        missing=tuple(missing),
        diagnostics=tuple(diagnostics),
        successors=frozen(buckets["supersede"]),
        retractions=frozen(buckets["retract"]),
        challengers=frozen(buckets["challenge"]),
        owned=owned,
    )


# ------------------------------------------------------------------------- rows


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
    memory: VerifiedMemory, record: Record, probe: Probe, known_ids: Container[str]
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


class RowJudge:
    """Projects record/supersede memories one at a time at one query context, sharing the
    commit-state and ancestry answers between rows.

    ``at_commit`` is the query commit (None: each row's own anchor commit); ``subject`` and
    ``path`` narrow applicability as recall's ``--subject``/``--path`` do ("": no narrowing).
    """

    def __init__(
        self,
        probe: Probe,
        *,
        at_commit: str | None,
        policy: PolicyContext,
        subject: str = "",
        path: str = "",
    ) -> None:
        self._probe = probe
        self._at = at_commit
        self._policy = policy
        self._subject = subject
        self._path = path
        self._ancestry = _Ancestry(probe)
        self._states: dict[str, str] = {}

    def row(self, memory: VerifiedMemory, relations: Relations, known_ids: Container[str]) -> Row:
        """The row of one record or supersede memory.

        ``known_ids`` answers whether a memory ID is in the verified set (memory evidence).
        """
        env = memory.envelope
        record = env.record
        if record is None:
            raise ValueError("only record and supersede envelopes have rows")
        mid = memory.memory_id
        applicability, app_deps = _applicability(
            memory, record, self._probe, self._ancestry, self._states, self._at,
            self._subject, self._path,
        )  # fmt: skip
        evidence, details, ev_deps = _evidence(memory, record, self._probe, known_ids)
        own = [*app_deps, *ev_deps, *relations.owned.get(mid, ())]
        return Row(
            id=mid,
            stream=env.stream,
            actor=env.actor,
            operation=env.operation,
            timestamp=env.timestamp,
            kind=record.kind,
            content_digest="sha256:" + hashlib.sha256(record.content.encode()).hexdigest(),
            anchor=record.anchor,
            lifecycle=relations.lifecycle(mid, env.operation),
            challengers=relations.challengers.get(mid, ()),
            successors=relations.successors.get(mid, ()),
            retractions=relations.retractions.get(mid, ()),
            applicability=applicability,
            evidence=evidence,
            evidence_details=details,
            trust=self._policy.trust(env.actor, record.kind),
            record=record,
            dependencies=tuple(sorted(set(own), key=_dependency_key)),
        )


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
    by_id: dict[str, VerifiedMemory] = {}
    for memory in memories:
        seen = by_id.get(memory.memory_id)
        if seen is None or memory.commit < seen.commit:
            by_id[memory.memory_id] = memory
    relations = relate(stub(m) for m in by_id.values())
    judge = RowJudge(probe, at_commit=at_commit, policy=policy, subject=subject or "",
                     path=path or "")  # fmt: skip
    rows: list[Row] = []
    missing = list(relations.missing)
    for mid in sorted(by_id):
        memory = by_id[mid]
        if memory.envelope.operation not in ("record", "supersede"):
            continue
        row = judge.row(memory, relations, by_id)
        missing.extend(d for d in row.dependencies if d.kind != "lifecycle-target")
        rows.append(row)
    unique_missing = sorted(
        set(missing), key=lambda d: (d.missing_id, d.owner_id, d.kind, d.operation)
    )
    return Projection(
        policy_commit=policy.commit,
        policy_digest=policy.digest,
        rows=tuple(rows),
        relationships=relations.relationships,
        missing_dependencies=tuple(unique_missing),
        diagnostics=relations.diagnostics,
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
    """``{kind, ownerId, stream, operation∅, missingId, reason}`` (``operation`` only on
    lifecycle-target dependencies, as upstream writes them)."""
    out: dict[str, Any] = {"kind": dep.kind, "ownerId": dep.owner_id, "stream": dep.stream}
    if dep.operation:
        out["operation"] = dep.operation
    out["missingId"] = dep.missing_id
    out["reason"] = dep.reason
    return out


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
    "Relations",
    "Relationship",
    "Row",
    "RowJudge",
    "Stub",
    "dependency_wire",
    "diagnostic_wire",
    "evidence_detail_wire",
    "project",
    "projection_wire",
    "relate",
    "relationship_wire",
    "row_parts",
    "row_wire",
    "stub",
]
