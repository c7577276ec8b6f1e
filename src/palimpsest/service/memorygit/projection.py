"""Memory Git's accepted memory at a head (``memory-context/v1``) — pure.

The projection of a head is a function of the changesets reachable from it and nothing else:
the DAG is walked from the roots to the head in a fixed order (parents first, in ``parent_ids``
order, each changeset once), and the ops of every changeset go, in ordinal order, through the
one projection of history (:func:`palimpsest.service.projection.apply`, the same function the
record projection of ``refs/shared/main`` uses), its entries held here in memory
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
from palimpsest.service import projection as one
from palimpsest.service.model import Changeset, Member, Op, RecordBody
from palimpsest.service.projection import Entry
from palimpsest.text import lexical_tokens

PROJECTION_VERSION = "memory-context/v1"
DEFAULT_LIMIT = 20
MAX_LIMIT = 100


@dataclass(slots=True)
class Projection:
    """Accepted memory at one head: entries by id, relationships, applied changesets. Its
    entries are values (the one projection never changes one in place), so a copy is cheap."""

    project_id: str
    memories: dict[str, Entry] = field(default_factory=dict)
    relationships: list[dict[str, Any]] = field(default_factory=list)
    applied: list[str] = field(default_factory=list)
    seq: int = 0

    @property
    def project(self) -> str:
        """The memory whose history this is (:class:`palimpsest.service.projection.State`)."""
        return self.project_id

    def entry(self, record_id: str) -> Entry | None:
        """An entry of this head."""
        return self.memories.get(record_id)

    def body(self, entry: Entry) -> RecordBody | None:
        """Record bodies are the record projection's; this view never reads them."""
        return None

    def member(self, member_id: str) -> Member | None:
        """Members are the service's; this view needs none."""
        return None

    def copy(self) -> Projection:
        """A copy to try a changeset on without touching this one."""
        return Projection(self.project_id, dict(self.memories),
                          [dict(r) for r in self.relationships], list(self.applied), self.seq)

    def snapshot(self) -> dict[str, Any]:
        """Every memory and relationship as wire values (for equality checks and diffs)."""
        return {"memories": {k: self.memories[k].to_wire() for k in sorted(self.memories)},
                "relationships": list(self.relationships)}


def apply_op(state: Projection, cs: Changeset, op: Op) -> None:
    """Apply one op to ``state`` in place, enforcing the semantic rules of §4.

    Raises:
        InvalidInput: the op breaks a rule (missing target, self-supersede, lower trust, …).
    """
    state.seq += 1
    for change in one.apply(state, cs, op, state.seq):
        state.memories[change.entry.memory_id] = change.entry
        if change.relationship is not None:
            state.relationships.append(dict(change.relationship))


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
    active = [m for m in state.memories.values() if m.status == "active" and not m.external]

    def overlap(m: Entry) -> int:
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


__all__ = ["PROJECTION_VERSION", "Projection", "apply_changeset", "apply_op", "context",
           "project_head", "replay", "walk"]
