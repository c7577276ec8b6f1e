"""What a reviewer reads before deciding on a proposal: the review queue, open counts, and a
proposal's dossier (memory-git.md §9–§10).

A dossier gathers, for one proposal the caller may read: the target ref's head now and how
many changesets it gained since the proposal opened (staleness), the conflicts recorded when it
opened and those detected now against the target's head, near-duplicates already in shared
memory for what its ops bring, and a field-by-field account of every op of every changeset it
would merge, each field's value before the op beside the value the op sets.

The pure parts — :func:`changes` (the per-op account over a projection), :func:`summary`,
:func:`picked` — take values; :func:`build`, :func:`queue`, :func:`open_counts` and
:func:`pending` read through a :class:`ReviewFlow` with the caller's principal, so every read
is the flow's own access check: a proposal of a memory the caller cannot see answers exactly as
an unknown one. What this module does not do: render anything, or write.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from palimpsest.errors import Conflict, Forbidden, InvalidInput, NotFound
from palimpsest.service.memorygit import projection as gitproject
from palimpsest.service.memorygit.flow import ReviewFlow
from palimpsest.service.memorygit.projection import Projection
from palimpsest.service.memorygit.repository import SHARED_MAIN, hidden
from palimpsest.service.memorygit.review import OPEN_STATES
from palimpsest.service.model import Changeset, Op, Wire

DUPLICATE_TEXT = 1000  # characters of an op's content searched for near-duplicates
DUPLICATE_OPS = 25  # ops of a proposal searched for near-duplicates (one recall each)
DUPLICATE_HITS = 3  # records kept per op
SUMMARY_CHARS = 200
_BRINGS_TEXT = ("add_memory", "correct_memory", "supersede_memory")

# (memory id, text) -> recall hits ({record, memory, score}) in the caller's reach
Similar = Callable[[str, str], Sequence[Wire]]
# (memory id, record id) -> the record's current values under Memory Git field names, or None
# when that memory holds no such record
Recorded = Callable[[str, str], Mapping[str, Any] | None]
# principal -> member type (human | agent), or None
MemberType = Callable[[str], str | None]


@dataclass(frozen=True, slots=True)
class FieldChange:
    """One field an op sets: its value before the op (``None``: not set, or not known) and
    the value the op gives it."""

    name: str
    before: Any
    after: Any


@dataclass(frozen=True, slots=True)
class OpChange:
    """One op of a proposed changeset with every field it sets."""

    ordinal: int
    op_type: str
    target: str | None
    result: str | None
    fields: tuple[FieldChange, ...]
    target_known: bool  # the target's values before the op are known (``before`` is real)
    erased: bool = False  # the op's payload was erased: nothing of it is shown


@dataclass(frozen=True, slots=True)
class ChangesetChange:
    """A changeset a merge would bring, with its ops."""

    changeset_id: str
    author: str
    message: str
    created_at: str
    parent_ids: tuple[str, ...]
    ops: tuple[OpChange, ...]


@dataclass(frozen=True, slots=True)
class Duplicate:
    """A record already in shared memory whose words match what an op brings."""

    op: str  # "<changeset id>:<ordinal>"
    record: Wire
    memory: Wire
    score: float | None


@dataclass(frozen=True, slots=True)
class Dossier:
    """Everything a review of one proposal reads (see the module docs)."""

    proposal: Wire  # with its reviews and ``summary``
    target_head: str | None
    stale_by: int  # changesets the target gained since the proposal was opened
    changesets: tuple[ChangesetChange, ...]
    stored_conflicts: tuple[Wire, ...]
    live_conflicts: tuple[Wire, ...]
    duplicates: tuple[Duplicate, ...]
    member_types: Mapping[str, str]  # principal -> human | agent, for everyone named on it


# --- pure --------------------------------------------------------------------------------------
def summary(changesets: Sequence[Changeset]) -> str:
    """The words a proposal is known by: the first op's ``summary`` or else its ``content``
    (a reviewed write's proposal carries no content of its own, so erase reaches all of it);
    ``""`` when no op says anything (or every payload was erased)."""
    for cs in changesets:
        for op in cs.ops:
            payload = op.payload or {}
            for name in ("summary", "content"):
                value = payload.get(name)
                if isinstance(value, str) and value.strip():
                    return value.strip()[:SUMMARY_CHARS]
    return ""


def _field_order(name: str) -> tuple[bool, bool, str]:
    return name != "content", name != "summary", name


def changes(base: Projection, changesets: Sequence[Changeset],
            recorded: Recorded) -> tuple[ChangesetChange, ...]:
    """Every op of ``changesets`` (roots first) with each field it sets beside that field's
    value just before the op: a Memory Git memory as the replay from ``base`` holds it at that
    point (earlier ops of the same changeset included), a record of the service
    (``recorded``) as it stands now — what a merge would act on. ``base`` is consumed (pass a
    copy)."""
    out: list[ChangesetChange] = []
    state = base
    for cs in changesets:
        ops: list[OpChange] = []
        replays = True
        for ordinal, op in enumerate(cs.ops):
            ops.append(_op_change(state, ordinal, op, recorded))
            if replays:
                try:
                    gitproject.apply_op(state, cs, op)
                except InvalidInput:  # a server-made merge over another base: show, go on
                    replays = False
        out.append(ChangesetChange(cs.id, cs.author, cs.message, cs.created_at, cs.parent_ids,
                                   tuple(ops)))
    return tuple(out)


def _op_change(state: Projection, ordinal: int, op: Op, recorded: Recorded) -> OpChange:
    if op.payload is None:
        return OpChange(ordinal, op.op_type, op.target, op.result, (), False, True)
    payload = dict(op.payload)
    memory = state.memories.get(op.target or "")
    before: Mapping[str, Any] | None = None
    if memory is not None and "external" not in memory.payload:
        before = memory.fields
    elif op.target:
        before = recorded(state.project_id, op.target)
    fields = tuple(FieldChange(n, (before or {}).get(n), payload[n])
                   for n in sorted(payload, key=_field_order))
    return OpChange(ordinal, op.op_type, op.target, op.result, fields, before is not None)


def picked(changesets: Sequence[Changeset], selected: Sequence[str],
           merger: str) -> list[Changeset]:
    """What a cherry-pick of ``selected`` (``"<changeset id>:<ordinal>"``) would accept: the
    picked ops, each in its changeset, authored by the merger (ids as on the branch; the real
    pick derives new ones)."""
    wanted = {tuple(item.split(":", 1)) for item in selected}
    out = []
    for cs in changesets:
        ops = tuple(op for i, op in enumerate(cs.ops) if (cs.id, str(i)) in wanted)
        if ops:
            out.append(replace(cs, ops=ops, author=merger))
    return out


# --- reads through the flow --------------------------------------------------------------------
def _summed(flow: ReviewFlow, doc: Wire) -> Wire:
    mine = flow.git.only_in(doc["head_changeset_id"], doc["base_changeset_id"])
    return {**doc, "summary": summary(mine)}


def proposals(flow: ReviewFlow, principal: str, project: str, *,
              open_only: bool) -> list[Wire]:
    """Proposals of a project (newest first), each with its ``summary``. Raises NotFound /
    Forbidden as the flow does for a project the caller may not read."""
    docs = flow.list_proposals(principal, project)
    return [_summed(flow, d) for d in docs if not open_only or d["status"] in OPEN_STATES]


def queue(flow: ReviewFlow, principal: str) -> list[tuple[str, list[Wire]]]:
    """Open proposals in every project with Memory Git history the caller may read, by
    project; projects without an open proposal are left out."""
    out = []
    for project in flow.git.list_projects(principal):
        items = proposals(flow, principal, project, open_only=True)
        if items:
            out.append((project, items))
    return out


def open_counts(flow: ReviewFlow, principal: str, projects: Sequence[str]) -> dict[str, int]:
    """How many proposals are open in each of ``projects`` the caller may read (a project it
    may not read is left out; one without Memory Git history counts 0)."""
    out: dict[str, int] = {}
    for project in dict.fromkeys(projects):
        try:
            docs = flow.list_proposals(principal, project)
        except (NotFound, Forbidden):
            continue
        out[project] = sum(1 for d in docs if d["status"] in OPEN_STATES)
    return out


def pending(flow: ReviewFlow, principal: str, proposal_id: str,
            project: str) -> tuple[Wire, list[Changeset]]:
    """A proposal of ``project`` and the changesets its merge would accept into
    ``refs/shared/main`` now (roots first): everything its pinned head holds that the target
    does not, or only the selected ops of a cherry-pick. A proposal of another memory answers
    like an unknown one.

    Raises:
        NotFound: unknown or unseen proposal. Conflict: the proposal is closed.
    """
    doc = flow.get_proposal(principal, proposal_id)
    if doc["project_id"] != project:
        raise hidden("proposal")
    if doc["status"] not in OPEN_STATES:
        raise Conflict(f"proposal is {doc['status']}: nothing of it is pending",
                       code="proposal-closed", hint="choose an open proposal")
    if doc["target_ref"] != SHARED_MAIN:  # only accepted memory projects into records
        return doc, []
    head = flow.git.ref_or_404(project, SHARED_MAIN)["head_changeset_id"]
    mine = flow.git.only_in(doc["head_changeset_id"], head)
    if doc["selected_ops"]:
        mine = picked(mine, doc["selected_ops"], principal)
    return doc, mine


def build(flow: ReviewFlow, principal: str, proposal_id: str, *, similar: Similar,
          recorded: Recorded, member_type: MemberType) -> Dossier:
    """The dossier of a proposal the caller may read (see the module docs).

    Raises:
        NotFound: unknown or unseen proposal (the same answer for both).
    """
    git = flow.git
    doc = _summed(flow, flow.get_proposal(principal, proposal_id))
    project = doc["project_id"]
    target = git.ref_or_404(project, doc["target_ref"])["head_changeset_id"]
    base = doc["base_changeset_id"]
    stale_by = len(git.only_in(target, base)) if target and target != base else 0
    merge_base = git.merge_base(target, doc["head_changeset_id"])
    mine = git.only_in(doc["head_changeset_id"], merge_base)
    stored = tuple(c for c in flow.list_conflicts(principal, project, None, 500)["conflicts"]
                   if c.get("proposal_id") == proposal_id)
    live: tuple[Wire, ...] = ()
    if doc["status"] in OPEN_STATES and target:
        try:
            live = tuple(flow.detect(principal, project, {
                "base_changeset_id": merge_base, "left_changeset_id": target,
                "right_changeset_id": doc["head_changeset_id"]})["conflicts"])
        except (InvalidInput, Conflict):  # histories that do not replay together
            live = ({"conflict_type": "does_not_replay", "severity": "blocking",
                     "summary": "the proposal does not apply over the target's head",
                     "status": "open", "conflict_id": ""},)
    named = {doc["originator_principal"], *(r["reviewer_principal"] for r in doc["reviews"]),
             *(cs.author for cs in mine)}
    types = {p: t for p in sorted(named) if (t := member_type(p))}
    return Dossier(proposal=doc, target_head=target, stale_by=stale_by,
                   changesets=changes(git.project(project, merge_base), mine, recorded),
                   stored_conflicts=stored, live_conflicts=live,
                   duplicates=duplicates(project, mine, similar), member_types=types)


def duplicates(project: str, changesets: Sequence[Changeset],
               similar: Similar) -> tuple[Duplicate, ...]:
    """Records already in shared memory (``similar``: a recall in the caller's reach) whose
    words match what an add, correction or supersession brings — at most
    :data:`DUPLICATE_OPS` ops searched, :data:`DUPLICATE_HITS` records each, never the op's
    own target or result."""
    out: list[Duplicate] = []
    searched = 0
    for cs in changesets:
        for ordinal, op in enumerate(cs.ops):
            text = str((op.payload or {}).get("content") or "")[:DUPLICATE_TEXT]
            if op.op_type not in _BRINGS_TEXT or not text.strip():
                continue
            if searched >= DUPLICATE_OPS:
                return tuple(out)
            searched += 1
            for hit in list(similar(project, text))[:DUPLICATE_HITS]:
                if hit["record"]["id"] in (op.result, op.target):
                    continue
                score = hit.get("score")
                out.append(Duplicate(f"{cs.id}:{ordinal}", hit["record"], hit["memory"],
                                     float(score) if isinstance(score, int | float) else None))
    return tuple(out)


__all__ = ["ChangesetChange", "Dossier", "Duplicate", "FieldChange", "OpChange", "build",
           "changes", "duplicates", "open_counts", "pending", "picked", "proposals", "queue",
           "summary"]
