"""Replay of Memory Git changesets into accepted memory (``memory-context/v1``) — pure.

The projection of a head is a function of the changesets reachable from it and nothing else:
the DAG is walked from the roots to the head in a fixed order (parents first, in ``parent_ids``
order, each changeset once), and the ops of every changeset are applied in ordinal order
(memory-git.md §8). The same :func:`apply_changeset` runs when a changeset is created, so a
changeset that cannot be replayed over its parents is never stored.

Overlays: add, correct (target becomes ``corrected``), supersede (``superseded``), duplicate
(``duplicate``); a deprecation *proposal* keeps the memory active and records the reason.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from palimpsest.errors import Conflict, InvalidInput
from palimpsest.service.memorygit.ops import KINDS, LOW_TRUST, VISIBILITIES
from palimpsest.service.model import Changeset, Op
from palimpsest.text import lexical_tokens, trim_space

PROJECTION_VERSION = "memory-context/v1"
DEFAULT_LIMIT = 20
MAX_LIMIT = 100
_MEMORY_FIELDS = ("content", "event_type", "kind", "scope", "visibility", "tags", "confidence")
_CORRECTION_KEYS = frozenset({"content", "kind", "event_type", "scope", "visibility", "tags",
                              "confidence", "fact_key", "subject", "valid_from", "valid_to",
                              "protected", "approval"})


def _reject(op: Op, message: str) -> InvalidInput:
    return InvalidInput(f"op {op.op_type}: {message}", code="invalid-op")


@dataclass(slots=True)
class MemoryState:
    """One memory in the projection (mutable only while a replay runs)."""

    memory_id: str
    fields: dict[str, Any]
    status: str
    source: str
    introduced_changeset_id: str
    last_changeset_id: str
    changed_seq: int
    source_event_id: str | None = None
    payload: dict[str, Any] = field(default_factory=dict)
    evidence: list[dict[str, Any]] = field(default_factory=list)
    verification: list[dict[str, Any]] = field(default_factory=list)

    @property
    def trust(self) -> str:
        """``user_approved`` when approved by a person, else the stated source trust."""
        if self.payload.get("approval") == "user_approved":
            return "user_approved"
        return str(self.payload.get("source_trust", ""))

    def to_wire(self) -> dict[str, Any]:
        """``AcceptedMemory`` (memory-git.md §8)."""
        out: dict[str, Any] = {"memory_id": self.memory_id,
                               "content": self.fields.get("content", "")}
        for name in _MEMORY_FIELDS[1:]:
            if name in self.fields:
                out[name] = self.fields[name]
        out.update({"status": self.status, "source": self.source})
        if self.source_event_id:
            out["source_event_id"] = self.source_event_id
        out["introduced_changeset_id"] = self.introduced_changeset_id
        out["last_changeset_id"] = self.last_changeset_id
        if self.evidence:
            out["evidence"] = list(self.evidence)
        if self.verification:
            out["verification"] = list(self.verification)
        if self.payload:
            out["payload"] = dict(self.payload)
        return out


@dataclass(slots=True)
class Projection:
    """Accepted memory at one head: memories by id, relationships, applied changesets."""

    project_id: str
    memories: dict[str, MemoryState] = field(default_factory=dict)
    relationships: list[dict[str, Any]] = field(default_factory=list)
    applied: list[str] = field(default_factory=list)
    seq: int = 0

    def copy(self) -> Projection:
        """A deep-enough copy to try a changeset without touching this one."""
        memories = {
            k: MemoryState(m.memory_id, dict(m.fields), m.status, m.source,
                           m.introduced_changeset_id, m.last_changeset_id, m.changed_seq,
                           m.source_event_id, dict(m.payload), list(m.evidence),
                           list(m.verification))
            for k, m in self.memories.items()
        }
        return Projection(self.project_id, memories, [dict(r) for r in self.relationships],
                          list(self.applied), self.seq)

    def snapshot(self) -> dict[str, Any]:
        """Every memory and relationship as wire values (for equality checks and diffs)."""
        return {"memories": {k: self.memories[k].to_wire() for k in sorted(self.memories)},
                "relationships": list(self.relationships)}


def _memory_from(op: Op, cs: Changeset, seq: int, base: dict[str, Any] | None,
                 source_event: str | None) -> MemoryState:
    payload = dict(op.payload or {})
    fields_ = dict(base or {})
    for name in _MEMORY_FIELDS:
        if name in payload:
            fields_[name] = payload[name]
    content = fields_.get("content", "")
    if not isinstance(content, str) or not trim_space(content):
        raise _reject(op, "content must be non-empty")
    if "kind" in fields_ and fields_["kind"] not in KINDS:
        raise _reject(op, f"kind must be one of {', '.join(KINDS)}")
    if "visibility" in fields_ and fields_["visibility"] not in VISIBILITIES:
        raise _reject(op, f"visibility must be one of {', '.join(VISIBILITIES)}")
    if "scope" in fields_ and not trim_space(str(fields_["scope"])):
        raise _reject(op, "scope must be a non-empty string")
    if not op.result:  # assigned by gitops.assign_ids before anything is applied
        raise _reject(op, "has no resulting_event_id")
    return MemoryState(op.result, fields_, "active", cs.author,
                       cs.id, cs.id, seq, source_event, payload)


def _existing(state: Projection, op: Op, memory_id: str | None, what: str) -> MemoryState:
    if not memory_id:
        raise _reject(op, f"{what} is required")
    found = state.memories.get(memory_id)
    if found is None:
        raise _reject(op, f"{what} {memory_id!r} does not exist at the parent")
    return found


def apply_op(state: Projection, cs: Changeset, op: Op) -> None:
    """Apply one op to ``state`` in place, enforcing the semantic rules of §4.

    Raises:
        InvalidInput: the op breaks a rule (missing target, self-supersede, lower trust, …).
    """
    if op.payload is None:
        _apply_erased(state, cs, op)
        return
    payload = dict(op.payload)
    if payload.get("project_id", state.project_id) != state.project_id:
        raise _reject(op, "targets another project")
    state.seq += 1
    kind = op.op_type
    if kind in _UHP_OPS:
        _apply_uhp(state, cs, op, payload)
    elif kind == "add_memory":
        new = _memory_from(op, cs, state.seq, None, None)
        if new.memory_id in state.memories:
            raise _reject(op, f"memory {new.memory_id!r} already exists")
        state.memories[new.memory_id] = new
    elif kind in ("correct_memory", "supersede_memory"):
        target = _existing(state, op, op.target, "target_event_id")
        if op.result == target.memory_id:
            raise _reject(op, "the result must differ from the target")
        if op.result in state.memories:
            raise _reject(op, f"memory {op.result!r} already exists")
        if kind == "correct_memory" and not (_CORRECTION_KEYS & set(payload)):
            raise _reject(op, "a correction needs at least one corrected field")
        if (kind == "supersede_memory" and payload.get("source_trust") in LOW_TRUST
                and target.trust == "user_approved"):
            raise _reject(op, "an inference cannot replace user-approved memory")
        base = target.fields if kind == "correct_memory" or "content" not in payload else None
        new = _memory_from(op, cs, state.seq, base, target.memory_id)
        target.status = "corrected" if kind == "correct_memory" else "superseded"
        target.last_changeset_id = cs.id
        target.changed_seq = state.seq
        state.memories[new.memory_id] = new
    elif kind == "mark_duplicate":
        dup_id, of_id = payload.get("duplicate_id"), payload.get("duplicate_of")
        dup = _existing(state, op, dup_id, "duplicate_id")
        _existing(state, op, of_id, "duplicate_of")
        if dup_id == of_id:
            raise _reject(op, "a memory cannot duplicate itself")
        dup.status = "duplicate"
        dup.payload["duplicate_of"] = of_id
        dup.last_changeset_id, dup.changed_seq = cs.id, state.seq
    elif kind == "add_relationship":
        src, dst = payload.get("from_memory_id"), payload.get("to_memory_id")
        _existing(state, op, src, "from_memory_id")
        _existing(state, op, dst, "to_memory_id")
        if src == dst or not trim_space(str(payload.get("kind", ""))):
            raise _reject(op, "needs two distinct memories and a non-empty kind")
        state.relationships.append({"from_memory_id": src, "to_memory_id": dst,
                                    "kind": payload["kind"], "changeset_id": cs.id})
    elif kind == "propose_deprecation":
        target = _existing(state, op, op.target, "target_event_id")
        if not trim_space(str(payload.get("reason", ""))):
            raise _reject(op, "reason must be non-empty")
        target.payload["deprecation_proposed"] = payload["reason"]
        target.last_changeset_id, target.changed_seq = cs.id, state.seq
    else:  # attach_evidence, attach_verification
        item: dict[str, Any] = {
            k: payload[k] for k in ("kind", "source", "note", "status") if k in payload
        }
        item["changeset_id"] = cs.id
        if op.target:
            target = _existing(state, op, op.target, "target_event_id")
            bucket = target.evidence if kind == "attach_evidence" else target.verification
            bucket.append(item)
            target.last_changeset_id, target.changed_seq = cs.id, state.seq
        elif not payload.get("summary") or not (
            {"reviewer", "proposal_id", "source_changeset_id", "rejected_from",
             "cherrypicked_from", "left_branch", "right_branch"} & set(payload)):
            raise _reject(op, "an attestation without a target needs summary and provenance")


def _apply_erased(state: Projection, cs: Changeset, op: Op) -> None:
    """An op whose payload was erased: what it names itself still counts (the memory it made
    stands as ``erased``; a correction or supersession still retires its target)."""
    state.seq += 1
    if op.op_type not in ("add_memory", "correct_memory", "supersede_memory") or not op.result:
        return
    target = state.memories.get(op.target or "") if op.op_type != "add_memory" else None
    if target is not None:
        target.status = "corrected" if op.op_type == "correct_memory" else "superseded"
        target.last_changeset_id, target.changed_seq = cs.id, state.seq
    state.memories[op.result] = MemoryState(op.result, {}, "erased", cs.author, cs.id, cs.id,
                                            state.seq, payload={"erased": True})


# Ops of UHP record writes share the history. Their bodies live outside the changeset (so that
# erase can remove them), so the projection tracks only their ids and status: Memory Git ops may
# target them; they are read through the UHP routes, not listed by ``context``.
_UHP_OPS = frozenset({"add_record", "revise_record", "forget_record", "erase_record"})


def _apply_uhp(state: Projection, cs: Changeset, op: Op, payload: dict[str, Any]) -> None:
    if op.op_type == "add_record":
        rid = str(payload.get("record_id", ""))
        state.memories[rid] = MemoryState(rid, {}, "active", cs.author,
                                          cs.id, cs.id, state.seq,
                                          payload={"external": "uhp_record"})
        return
    target = state.memories.get(op.target or "")
    if target is None:
        return  # history the projection never saw (erased); nothing to overlay
    target.last_changeset_id, target.changed_seq = cs.id, state.seq
    if op.op_type == "erase_record":
        target.status = "erased"
        target.fields = {}
        target.evidence, target.verification = [], []
    elif op.op_type == "forget_record":
        target.status = "forgotten"
    else:
        target.status = "active"


def apply_changeset(state: Projection, cs: Changeset) -> None:
    """Apply every op of ``cs`` in order (a later op may target an earlier one's memory).

    Raises:
        InvalidInput: ``ops[<ordinal>] <op_type>: <rule>`` for the first op that breaks one.
    """
    for ordinal, op in enumerate(cs.ops):
        try:
            apply_op(state, cs, op)
        except InvalidInput as exc:
            raise InvalidInput(f"ops[{ordinal}] {exc.message}", code=exc.code,
                               hint=exc.hint) from None
    state.applied.append(cs.id)


Loader = Callable[[str], Changeset]


def walk(head: str | None, load: Loader) -> list[Changeset]:
    """Changesets reachable from ``head``, roots first, parents in ``parent_ids`` order.

    Raises:
        Conflict: the graph has a cycle (impossible for content we created; fail closed).
    """
    if head is None:
        return []
    order: list[Changeset] = []
    done: set[str] = set()
    active: set[str] = set()
    stack: list[tuple[str, bool]] = [(head, False)]
    cache: dict[str, Changeset] = {}
    while stack:
        cid, expanded = stack.pop()
        if cid in done:
            continue
        if expanded:
            active.discard(cid)
            done.add(cid)
            order.append(cache[cid])
            continue
        if cid in active:
            raise Conflict("changeset graph has a cycle", code="integrity_failure")
        active.add(cid)
        cs = cache.setdefault(cid, load(cid))
        stack.append((cid, True))
        for parent in reversed(cs.parent_ids):
            if parent not in done:
                stack.append((parent, False))
    return order


def replay(project_id: str, changesets: Iterable[Changeset]) -> Projection:
    """Project from scratch by applying ``changesets`` in the given order."""
    state = Projection(project_id)
    for cs in changesets:
        apply_changeset(state, cs)
    return state


def project_head(project_id: str, head: str | None, load: Loader) -> Projection:
    """Accepted memory at ``head``: replay of everything reachable from it."""
    return replay(project_id, walk(head, load))


def context(state: Projection, *, ref_name: str, head: str | None, query: str = "",
            limit: int | None = None, manifest_id: str | None = None) -> dict[str, Any]:
    """The ``MemoryContext`` body: active memories ranked by query overlap, recency, id.

    Raises:
        InvalidInput: ``limit`` outside 1..100.
    """
    if limit is None:
        limit = DEFAULT_LIMIT
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(f"limit must be between 1 and {MAX_LIMIT}", code="invalid-limit")
    wanted = set(lexical_tokens(query)) if query else set()
    active = [m for m in state.memories.values()
              if m.status == "active" and "external" not in m.payload]

    def overlap(m: MemoryState) -> int:
        return len(wanted & set(lexical_tokens(str(m.fields.get("content", ""))))) if wanted else 0

    ranked = sorted(active, key=lambda m: (-overlap(m), -m.changed_seq, m.memory_id))
    if wanted:
        ranked = [m for m in ranked if overlap(m) > 0] or []
    chosen = ranked[:limit]
    ids = {m.memory_id for m in chosen}
    out: dict[str, Any] = {"project_id": state.project_id, "ref_name": ref_name,
                           "head_changeset_id": head}
    if manifest_id:
        out["manifest_id"] = manifest_id
    out.update({"projection_version": PROJECTION_VERSION, "total_active": len(active),
                "memories": [m.to_wire() for m in chosen]})
    rels = [r for r in state.relationships
            if r["from_memory_id"] in ids or r["to_memory_id"] in ids]
    if rels:
        out["relationships"] = rels
    return out


__all__ = ["PROJECTION_VERSION", "MemoryState", "Projection", "apply_changeset", "apply_op",
           "context", "project_head", "replay", "walk"]
