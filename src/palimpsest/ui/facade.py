"""The review desk's one door into the service: every call the desk makes is in this module.

The desk reads and acts only through the service's facade — :class:`MemoryService` for the
tree, records, recall, prime and grants, and the Memory Git flow it carries
(:class:`~palimpsest.service.gitflow.ReviewFlow` and its :class:`GitService`) for refs,
changesets, proposals, reviews and merges — never through storage or SQL. The service decides
every rule (who sees what, self-review, the merge authorization); a desk page shows what the
caller's credential may see and nothing else. When the service's names change, this module is
the one place to adapt.

Every method here is synchronous and runs on the API's one service thread
(``invoke`` in :mod:`palimpsest.ui.app`).

**Derived here, to move into the service** (each is marked ``DESK-DERIVED`` below): open
proposal counts per memory, the review queue across memories, near-duplicates of a proposal's
content in shared memory, staleness of a proposal, the per-op field diff's "before" values,
the prime preview after a pending merge, and member types of proposal principals. They are
built only from public facade calls and pure service functions, so they see exactly what the
caller may see.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from palimpsest.errors import Conflict, Forbidden, InvalidInput, NotFound, PalError
from palimpsest.service.memories import MemoryService
from palimpsest.service.memorygit import projection as gitproject
from palimpsest.service.memorygit.flow import ReviewFlow
from palimpsest.service.model import SHARED_MAIN, Caller, Changeset, FileBytes, Op, Wire
from palimpsest.service.ops.prime import estimate_tokens
from palimpsest.service.providers import capability_document
from palimpsest.ui.worddiff import FieldDiff, field_diff

OPEN = ("open", "approved")
LIST_LIMIT = 200
DUPLICATE_TEXT = 1000  # characters of a proposed memory searched for near-duplicates
DUPLICATE_OPS = 25  # ops of a proposal searched for near-duplicates (one recall each)


def principal(caller: Caller) -> str:
    """The Memory Git principal of a caller."""
    return f"member:{caller.member.id}"


_UNSEEN = "no such proposal within your reach"


@contextmanager
def _proposal_reach() -> Iterator[None]:
    """DESK-DERIVED: a proposal in a memory the caller cannot see answers exactly like an
    unknown proposal (the flow says "no such memory" for the one, "no such proposal" for the
    other, which tells them apart)."""
    try:
        yield
    except NotFound as exc:
        raise NotFound(_UNSEEN, code="proposal-not-found",
                       hint="open the review queue for the proposals you may see") from exc


@dataclass(frozen=True, slots=True)
class OpView:
    """One op of a proposed changeset with a diff of every field it sets."""

    ordinal: int
    op_type: str
    target: str | None
    result: str | None
    fields: tuple[FieldDiff, ...]
    target_known: bool  # the target is a Memory Git memory at the base (its fields are shown)


@dataclass(frozen=True, slots=True)
class ChangesetView:
    """A changeset of a proposal, with its ops."""

    changeset_id: str
    author: str
    message: str
    created_at: str
    parent_ids: tuple[str, ...]
    ops: tuple[OpView, ...]


@dataclass(slots=True)
class ProposalView:
    """Everything the proposal page shows, gathered in one trip to the service thread."""

    proposal: Wire
    reviews: list[Wire]
    target_head: str | None
    stale_by: int  # changesets the target gained since the proposal was opened
    changesets: list[ChangesetView]
    stored_conflicts: list[Wire]
    live_conflicts: list[Wire]
    duplicates: list[Wire]
    types: dict[str, str] = field(default_factory=dict)  # principal → human | agent


class DeskService:
    """The facade calls of the desk, for one :class:`MemoryService` and its Memory Git."""

    def __init__(self, svc: MemoryService, flow: ReviewFlow) -> None:
        """Use ``svc`` and the Memory Git flow the API installed beside it."""
        self.svc = svc
        self.flow = flow

    # --- identity -------------------------------------------------------------------------
    def authenticate(self, credential: str) -> Caller:
        """The caller of a credential (the API's own check). Raises Forbidden."""
        cached = self.svc.cached_caller(credential)
        return cached if cached is not None else self.svc.authenticate(credential)

    def member_label(self, who: str) -> str:
        """DESK-DERIVED: ``name (type)`` of ``member:<id>`` (grants page), ``""`` otherwise."""
        kind, _, ident = who.partition(":")
        if kind != "member" or not ident:
            return ""
        try:
            member = self.svc.get_member(ident)
        except NotFound:
            return ""
        return f"{member.name} ({member.type})"

    def member_type(self, who: str) -> str:
        """DESK-DERIVED: ``human`` | ``agent`` for ``member:<id>``, ``""`` otherwise.

        Only asked for principals already shown on something the caller may read."""
        kind, _, ident = who.partition(":")
        if kind != "member" or not ident:
            return ""
        try:
            return self.svc.get_member(ident).type
        except NotFound:
            return ""

    # --- the tree -------------------------------------------------------------------------
    def roots(self, caller: Caller) -> list[Wire]:
        """Entry points: readable memories whose parent the caller cannot see."""
        return list(self.svc.list_memories(caller, limit=LIST_LIMIT)["data"])

    def memory(self, caller: Caller, memory_id: str) -> Wire:
        """One memory with the caller's privileges and counts. Raises memory_not_found."""
        return self.svc.get_memory(caller, memory_id)

    def children(self, caller: Caller, memory_id: str) -> list[Wire]:
        """Readable children of a memory."""
        return list(self.svc.list_memories(caller, parent=memory_id, limit=LIST_LIMIT)["data"])

    def ancestors(self, caller: Caller, memory: Wire) -> list[Wire]:
        """The memory's visible ancestors, root first (the server lists only those)."""
        return [self.svc.get_memory(caller, mid) for mid in memory.get("ancestors", [])]

    def open_proposals(self, caller: Caller, memory_id: str) -> list[Wire]:
        """Open proposals of a memory the caller may read (empty without Memory Git)."""
        return [self._summed(p) for p in self.flow.list_proposals(principal(caller), memory_id)
                if p["status"] in OPEN]

    def _summed(self, doc: Wire) -> Wire:
        """DESK-DERIVED: a proposal with ``summary``, the words of its first op (a reviewed
        write's proposal carries no content of its own, so erase can reach all of it)."""
        summary = ""
        for cs in self.flow.git.only_in(doc["head_changeset_id"], doc["base_changeset_id"]):
            for op in cs.ops:
                payload = op.payload or {}
                summary = str(payload.get("summary") or payload.get("content") or "")
                if summary:
                    return {**doc, "summary": summary[:200]}
        return {**doc, "summary": summary}

    def queue(self, caller: Caller) -> list[tuple[Wire, list[Wire]]]:
        """DESK-DERIVED: the review queue across every memory the caller may read."""
        out = []
        for project in self.flow.git.list_projects(principal(caller)):
            items = self.open_proposals(caller, project)
            if items:
                out.append((self.memory(caller, project), items))
        return out

    # --- records --------------------------------------------------------------------------
    def _typed(self, records: list[Wire]) -> list[Wire]:
        """DESK-DERIVED: records merged through Memory Git carry ``written_by`` without the
        member's type; fill it in (a copy) so every writer shows as human or agent."""
        out = []
        for rec in records:
            who = rec.get("written_by") or {}
            found = (self.member_type(f"member:{who.get('id', '')}")
                     if who.get("kind") == "member" and "type" not in who else "")
            out.append({**rec, "written_by": {**who, "type": found}} if found else rec)
        return out

    def records(self, caller: Caller, memory_id: str, *, type: str | None, include: str,
                cursor: str | None) -> Wire:
        """A page of records, newest first."""
        page = self.svc.list_records(caller, memory_id, type=type, include=include,
                                     cursor=cursor, limit=LIST_LIMIT)
        return {**page, "data": self._typed(list(page["data"]))}

    def recall(self, caller: Caller, memory_id: str, text: str,
               types: list[str] | None) -> Wire:
        """Subtree recall over the words of ``text``."""
        body: Wire = {"text": text, "limit": 50}
        if types:
            body["types"] = types
        answer = self.svc.recall(caller, memory_id, body)
        typed = self._typed([hit["record"] for hit in answer["results"]])
        return {**answer, "results": [{**hit, "record": rec}
                                      for hit, rec in zip(answer["results"], typed, strict=True)]}

    @staticmethod
    def served_signals() -> list[str]:
        """The recall signals the provider declares (capability document)."""
        return list(capability_document()["recall"]["signals"])

    def record(self, caller: Caller, memory_id: str, record_id: str) -> Wire:
        """One record (current version)."""
        return self._typed([self.svc.get_record(caller, memory_id, record_id)])[0]

    def history(self, caller: Caller, memory_id: str, record_id: str) -> list[Wire]:
        """Every version of a record, oldest first."""
        return self._typed(list(self.svc.record_history(caller, memory_id, record_id)["data"]))

    def content(self, caller: Caller, memory_id: str, record_id: str, index: int) -> FileBytes:
        """A file part's bytes."""
        return self.svc.record_content(caller, memory_id, record_id, index)

    # --- review ---------------------------------------------------------------------------
    def proposals(self, caller: Caller, memory_id: str) -> list[Wire]:
        """Every proposal of a memory, newest first."""
        return [self._summed(p) for p in self.flow.list_proposals(principal(caller), memory_id)]

    def proposal_view(self, caller: Caller, proposal_id: str) -> ProposalView:
        """A proposal with everything its review needs (see :class:`ProposalView`)."""
        who = principal(caller)
        with _proposal_reach():
            doc = self._summed(self.flow.get_proposal(who, proposal_id))  # the read check
        project = doc["project_id"]
        git = self.flow.git
        target = git.get_ref(who, project, doc["target_ref"])["head_changeset_id"]
        base = doc["base_changeset_id"]
        stale_by = len(git.only_in(target, base)) if target and target != base else 0
        merge_base = git.merge_base(target, doc["head_changeset_id"])
        mine = git.only_in(doc["head_changeset_id"], merge_base)
        changesets = _changeset_views(git.project(project, merge_base), mine)
        stored = [c for c in self.flow.list_conflicts(who, project, None, 500)["conflicts"]
                  if c.get("proposal_id") == proposal_id]
        live: list[Wire] = []
        if doc["status"] in OPEN and target:  # against refs/shared/main as it is now
            try:
                live = list(self.flow.detect(who, project, {
                    "base_changeset_id": merge_base, "left_changeset_id": target,
                    "right_changeset_id": doc["head_changeset_id"]})["conflicts"])
            except (InvalidInput, Conflict):  # histories that do not replay together
                live = [{"conflict_type": "does_not_replay", "severity": "blocking",
                         "summary": "the proposal does not apply over the target's head",
                         "status": "open", "conflict_id": ""}]
        view = ProposalView(
            proposal=doc, reviews=list(doc.get("reviews", [])), target_head=target,
            stale_by=stale_by, changesets=changesets, stored_conflicts=stored,
            live_conflicts=live,
            duplicates=self._duplicates(caller, project, mine))
        for name in {doc["originator_principal"], *(r["reviewer_principal"]
                                                    for r in view.reviews)}:
            view.types[name] = self.member_type(name)
        return view

    def _duplicates(self, caller: Caller, project: str,
                    changesets: list[Changeset]) -> list[Wire]:
        """DESK-DERIVED: records already in shared memory whose words match what an
        ``add_memory``/``correct_memory``/``supersede_memory`` op brings."""
        out: list[Wire] = []
        seen: set[tuple[str, str]] = set()
        searched = 0
        for cs in changesets:
            for ordinal, op in enumerate(cs.ops):
                text = str((op.payload or {}).get("content") or "")[:DUPLICATE_TEXT]
                if not text.strip() or searched >= DUPLICATE_OPS:
                    continue
                searched += 1
                answer = self.svc.recall(caller, project, {"text": text, "limit": 3})
                for hit in answer["results"]:
                    key = (f"{cs.id}:{ordinal}", hit["record"]["id"])
                    if hit["record"]["id"] == op.result or key in seen:
                        continue
                    seen.add(key)
                    out.append({"op": key[0], "record": hit["record"],
                                "memory": hit["memory"], "score": hit.get("score")})
        return out

    def review(self, caller: Caller, proposal_id: str, verdict: str, reason: str) -> Wire:
        """Record a verdict with its reason (the service refuses self-review)."""
        with _proposal_reach():
            self.flow.get_proposal(principal(caller), proposal_id)
        return self.flow.review(principal(caller), proposal_id,
                                {"verdict": verdict, "comment": reason})

    def merge(self, caller: Caller, proposal_id: str) -> Wire:
        """Merge as the caller: the server mints the single-use authorization for the caller
        (``authorize``) and then verifies it like any other before moving the ref (``merge``).
        Self-merge, a missing approval or a stale head are the service's refusals."""
        who = principal(caller)
        with _proposal_reach():
            doc = self.flow.get_proposal(who, proposal_id)
        body = self.flow.authorize(who, proposal_id, {})
        return self.flow.merge(who, doc["project_id"], body)

    def cancel(self, caller: Caller, proposal_id: str) -> Wire:
        """Cancel a proposal (the service allows only its originator)."""
        with _proposal_reach():
            self.flow.get_proposal(principal(caller), proposal_id)
        return self.flow.cancel(principal(caller), proposal_id)

    # --- prime ----------------------------------------------------------------------------
    def prime_preview(self, caller: Caller, memory_id: str, budget: int,
                      proposal_id: str | None) -> dict[str, Any]:
        """What an agent granted this memory receives at session start within ``budget``
        tokens: the server's prime block (standing records), then accepted Memory Git memory
        (``memory-context/v1`` at ``refs/shared/main``, the agent's orient step) in what is
        left of the budget. With ``proposal_id``, also the same after that proposal's merge
        (DESK-DERIVED: accepted memory replayed over the target head and the pinned head; the
        prime block without the records the proposal's ops forget)."""
        who = principal(caller)
        prime = self.svc.prime(caller, memory_id, budget)
        now = self._accepted(who, memory_id, None)
        out: dict[str, Any] = {"prime": prime, "budget": budget,
                               "before": _fit(now, budget - int(prime["tokens"]))}
        if proposal_id:
            with _proposal_reach():
                doc = self.flow.get_proposal(who, proposal_id)
            if doc["project_id"] != memory_id:
                raise NotFound(_UNSEEN, code="proposal-not-found")
            after = self._accepted(who, memory_id, doc)
            shared = self.flow.git.get_ref(who, memory_id, SHARED_MAIN)["head_changeset_id"]
            forgotten = _forgets(self.flow.git.only_in(doc["head_changeset_id"], shared))
            kept = [r for r in prime["records"] if r not in forgotten]
            out["proposal"] = doc
            out["after_records"] = kept
            out["after"] = _fit(after, budget - int(prime["tokens"]))
        return out

    def _accepted(self, who: str, project: str, proposal: Wire | None) -> dict[str, Wire]:
        git = self.flow.git
        try:
            head = git.get_ref(who, project, SHARED_MAIN)["head_changeset_id"]
        except NotFound:
            return {}
        if proposal is None:
            state = git.project(project, head)
        elif proposal["selected_ops"]:
            state = git.project(project, head)  # a cherry-pick: only the picked ops
            picked = {tuple(s.split(":", 1)) for s in proposal["selected_ops"]}
            for cs in git.only_in(proposal["head_changeset_id"], head):
                ops = tuple(op for i, op in enumerate(cs.ops) if (cs.id, str(i)) in picked)
                if ops:
                    gitproject.apply_changeset(state, _with_ops(cs, ops))
        else:
            parents = (head, proposal["head_changeset_id"]) if head else (
                proposal["head_changeset_id"],)
            state = git.project_parents(project, parents)
        ctx = gitproject.context(state, ref_name=SHARED_MAIN, head=head,
                                 limit=gitproject.MAX_LIMIT)
        return {m["memory_id"]: m for m in ctx["memories"]}

    # --- grants ---------------------------------------------------------------------------
    def grants(self, caller: Caller, memory_id: str) -> tuple[Wire, list[Wire], list[Wire]]:
        """For holders of ``delete``: the memory, its grants (direct and inherited, each
        naming its node, members labelled with name and type) and the memories they sit on.
        Raises memory_forbidden otherwise."""
        memory = self.memory(caller, memory_id)
        if "delete" not in memory["privileges"]:
            raise Forbidden("you need the delete privilege on this memory to see its grants",
                            code="memory_forbidden",
                            hint="ask a holder of delete here to show or change them")
        grants = [{**g, "label": self.member_label(g["principal"])}
                  for g in self.svc.list_grants(caller, memory_id)["data"]]
        nodes = [memory, *reversed(self.ancestors(caller, memory))]
        return memory, grants, nodes


def _with_ops(cs: Changeset, ops: tuple[Op, ...]) -> Changeset:
    return replace(cs, ops=ops)


def _forgets(changesets: list[Changeset]) -> set[str]:
    """Record ids a merge of ``changesets`` forgets (gitrecords' projection rules)."""
    out: set[str] = set()
    for cs in changesets:
        for op in cs.ops:
            if op.op_type in ("correct_memory", "supersede_memory") and op.target:
                out.add(op.target)
            elif op.op_type == "mark_duplicate":
                out.add(str((op.payload or {}).get("duplicate_id", "")))
    return out


def _fit(memories: dict[str, Wire], budget: int) -> dict[str, Any]:
    """Accepted memories, most recently changed first, while they fit in ``budget`` tokens."""
    placed: list[Wire] = []
    used = 0
    for m in memories.values():
        cost = estimate_tokens(str(m.get("content", ""))) + 8
        if used + cost > budget:
            break
        placed.append(m)
        used += cost
    return {"memories": placed, "tokens": used, "total": len(memories),
            "truncated": len(placed) < len(memories)}


def _changeset_views(base: gitproject.Projection,
                     changesets: list[Changeset]) -> list[ChangesetView]:
    """DESK-DERIVED: per-field diffs of every op, each against the memory it targets as it
    stood just before the op's changeset (replayed from the merge base, roots first)."""
    out: list[ChangesetView] = []
    state = base
    for cs in changesets:
        ops: list[OpView] = []
        for ordinal, op in enumerate(cs.ops):
            payload = dict(op.payload or {})
            target = state.memories.get(op.target or "")
            before: dict[str, Any] = dict(target.fields) if target is not None else {}
            names = sorted(payload, key=lambda n: (n != "content", n != "summary", n))
            fields = tuple(field_diff(n, before.get(n), payload[n]) for n in names)
            ops.append(OpView(ordinal, op.op_type, op.target,
                              op.result, fields, target is not None))
        out.append(ChangesetView(cs.id, cs.author, cs.message,
                                 cs.created_at, cs.parent_ids, tuple(ops)))
        try:
            gitproject.apply_changeset(state, cs)
        except PalError:  # a server-made merge changeset over another base: show, don't stop
            continue
    return out


__all__ = ["OPEN", "ChangesetView", "DeskService", "OpView", "ProposalView", "principal"]
