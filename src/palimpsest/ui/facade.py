"""The review desk's one door into the service: every call the desk makes is in this module.

The desk reads and acts only through the service's facade — :class:`MemoryService` for the
tree, records, recall, grants, the review queue, a proposal's dossier and the prime preview,
and the Memory Git flow it carries (:class:`~palimpsest.service.memorygit.flow.ReviewFlow`)
for reviews, merges and cancels — never through storage or SQL. The service decides every
rule (who sees what, self-review, the merge authorization) and derives everything a page
shows; what is left here is presentation: word-level diffs of the values the service gives.
When the service's names change, this module is the one place to adapt.

Every method here is synchronous and runs on the API's one service thread
(``invoke`` in :mod:`palimpsest.ui.app`).
"""

from __future__ import annotations

from dataclasses import dataclass

from palimpsest.service.memories import MemoryService
from palimpsest.service.memorygit.dossier import ChangesetChange, Dossier, OpChange
from palimpsest.service.memorygit.flow import ReviewFlow
from palimpsest.service.memorygit.review import OPEN_STATES
from palimpsest.service.model import Caller, FileBytes, Session, Wire
from palimpsest.service.providers import capability_document
from palimpsest.ui.worddiff import FieldDiff, field_diff

LIST_LIMIT = 200
OPEN = OPEN_STATES  # proposal states that still wait for a decision


def principal(caller: Caller) -> str:
    """The Memory Git principal of a caller."""
    return f"member:{caller.member.id}"


@dataclass(frozen=True, slots=True)
class OpView:
    """One op of a proposed changeset with a word diff of every field it sets."""

    op: OpChange
    fields: tuple[FieldDiff, ...]


@dataclass(frozen=True, slots=True)
class ChangesetView:
    """A changeset of a proposal, with its ops."""

    changeset: ChangesetChange
    ops: tuple[OpView, ...]


@dataclass(frozen=True, slots=True)
class ProposalView:
    """The service's dossier of a proposal and its changes as word diffs."""

    dossier: Dossier
    changesets: tuple[ChangesetView, ...]


def _views(dossier: Dossier) -> tuple[ChangesetView, ...]:
    return tuple(ChangesetView(cs, tuple(
        OpView(op, tuple(field_diff(f.name, f.before, f.after) for f in op.fields))
        for op in cs.ops)) for cs in dossier.changesets)


class DeskService:
    """The facade calls of the desk, for one :class:`MemoryService` and its Memory Git."""

    def __init__(self, svc: MemoryService, flow: ReviewFlow) -> None:
        """Use ``svc`` and the Memory Git flow the API installed beside it."""
        self.svc = svc
        self.flow = flow

    # --- sessions -------------------------------------------------------------------------
    def sign_in(self, credential: str, previous: str | None, *, idle_seconds: float,
                max_seconds: float) -> tuple[str, Session, Caller]:
        """Open a session with a credential (the service's own check; raises Forbidden), then
        forget the browser's ``previous`` session: an id never survives a sign-in."""
        opened = self.svc.open_session(credential, idle_seconds=idle_seconds,
                                       max_seconds=max_seconds)
        self.svc.close_session(previous)
        return opened

    def resume(self, session_id: str | None, *,
               idle_seconds: float) -> tuple[Session, Caller] | None:
        """The live session of a cookie and its caller, or ``None``."""
        return self.svc.resume_session(session_id, idle_seconds=idle_seconds)

    def sign_out(self, session_id: str | None) -> None:
        """Forget a session."""
        self.svc.close_session(session_id)

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

    def open_counts(self, caller: Caller, memory_ids: list[str]) -> dict[str, int]:
        """Open proposals per memory the caller may read."""
        return self.svc.open_proposal_counts(caller, memory_ids)

    # --- records --------------------------------------------------------------------------
    def records(self, caller: Caller, memory_id: str, *, type: str | None, include: str,
                cursor: str | None) -> Wire:
        """A page of records, newest first."""
        return self.svc.list_records(caller, memory_id, type=type, include=include,
                                     cursor=cursor, limit=LIST_LIMIT)

    def recall(self, caller: Caller, memory_id: str, text: str,
               types: list[str] | None) -> Wire:
        """Subtree recall over the words of ``text``."""
        body: Wire = {"text": text, "limit": 50}
        if types:
            body["types"] = types
        return self.svc.recall(caller, memory_id, body)

    @staticmethod
    def served_signals() -> list[str]:
        """The recall signals the provider declares (capability document)."""
        return list(capability_document()["recall"]["signals"])

    def record(self, caller: Caller, memory_id: str, record_id: str) -> Wire:
        """One record (current version)."""
        return self.svc.get_record(caller, memory_id, record_id)

    def history(self, caller: Caller, memory_id: str, record_id: str) -> list[Wire]:
        """Every version of a record, oldest first."""
        return list(self.svc.record_history(caller, memory_id, record_id)["data"])

    def content(self, caller: Caller, memory_id: str, record_id: str, index: int) -> FileBytes:
        """A file part's bytes."""
        return self.svc.record_content(caller, memory_id, record_id, index)

    # --- review ---------------------------------------------------------------------------
    def queue(self, caller: Caller) -> list[tuple[Wire, list[Wire]]]:
        """Open proposals across every memory the caller may read, by memory."""
        return self.svc.review_queue(caller)

    def proposals(self, caller: Caller, memory_id: str, *, open_only: bool = False
                  ) -> list[Wire]:
        """Proposals of a memory, newest first."""
        return self.svc.list_proposals(caller, memory_id, open_only=open_only)

    def proposal_view(self, caller: Caller, proposal_id: str) -> ProposalView:
        """A proposal with everything its review needs, its changes as word diffs."""
        dossier = self.svc.review_dossier(caller, proposal_id)
        return ProposalView(dossier, _views(dossier))

    def review(self, caller: Caller, proposal_id: str, verdict: str, reason: str) -> Wire:
        """Record a verdict with its reason (the service refuses self-review)."""
        return self.flow.review(principal(caller), proposal_id,
                                {"verdict": verdict, "comment": reason})

    def merge(self, caller: Caller, proposal_id: str) -> Wire:
        """Merge as the caller: the server mints the single-use authorization for the caller
        (``authorize``) and then verifies it like any other before moving the ref (``merge``).
        Self-merge, a missing approval or a stale head are the service's refusals."""
        who = principal(caller)
        body = self.flow.authorize(who, proposal_id, {})
        project = self.flow.get_proposal(who, proposal_id)["project_id"]
        return self.flow.merge(who, project, body)

    def cancel(self, caller: Caller, proposal_id: str) -> Wire:
        """Cancel a proposal (the service allows only its originator)."""
        return self.flow.cancel(principal(caller), proposal_id)

    # --- prime ----------------------------------------------------------------------------
    def prime(self, caller: Caller, memory_id: str, budget: int) -> Wire:
        """What an agent granted this memory receives at session start within ``budget``."""
        return self.svc.prime(caller, memory_id, budget)

    def prime_preview(self, caller: Caller, memory_id: str, budget: int,
                      proposal_id: str) -> Wire:
        """The prime now and as it would be after merging an open proposal (nothing is
        written)."""
        return self.svc.prime_preview(caller, memory_id, budget, proposal_id)

    # --- grants ---------------------------------------------------------------------------
    def grants(self, caller: Caller, memory_id: str) -> tuple[Wire, list[Wire], list[Wire]]:
        """For holders of ``delete``: the memory, its grants (direct and inherited, each
        naming its node and its holder) and the memories they sit on. Raises
        memory_forbidden otherwise."""
        grants = list(self.svc.grant_holders(caller, memory_id)["data"])
        memory = self.memory(caller, memory_id)
        nodes = [memory, *reversed(self.ancestors(caller, memory))]
        return memory, grants, nodes


__all__ = ["OPEN", "ChangesetView", "DeskService", "OpView", "ProposalView", "principal"]
