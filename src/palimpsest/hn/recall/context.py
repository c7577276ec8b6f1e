"""The judgments of one query context, made when a recall or grep asks (§13, §15).

The index is free of query context; this module decides, for a query commit, subject, path and
policy, which of its rows apply and what trust they have:

- **policy**: ``.hn/policy.json`` in the tree of the query commit, parsed once per blob (an
  unchanged blob gives an unchanged answer, whatever commit it is read from);
- **applicability**: the query commit must be a commit; a ``descendants`` row applies when its
  anchor is the query commit or an ancestor (the anchors a commit reaches, computed once per
  query commit and kept: :mod:`palimpsest.hn.index.reach`), an ``exact`` row when its anchor is
  the query commit, a ``subject`` row when the query names its subject; a subject filter also
  requires every row's anchor subject, and a path filter one of its anchored paths (both are
  postings of the index);
- **trust**: the class of each (actor, kind) under the policy, so trust filters become the
  row classes the index may return.

Git answers the three questions about the query commit (is it a commit, what does it reach,
what policy does it hold) through a :class:`Judge`: one that asks Git and keeps the answers in
the index (:mod:`palimpsest.hn.recall.run`), or :class:`KeptJudge`, which only reads what was
kept (a recall at a commit asked before then needs no Git at all).

The result is a :class:`QueryContext`: the index's :class:`~palimpsest.hn.index.query.View`
plus what recall needs to check and render each returned row.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from palimpsest.hn.ids import KINDS
from palimpsest.hn.index.core import Anchor, MemoryIndex
from palimpsest.hn.index.query import Selection, View, selection
from palimpsest.hn.index.schema import COLUMN, MODE_CODE, class_of, eligible
from palimpsest.hn.policy import PolicyContext, policy_context
from palimpsest.hn.recall.request import RecallRequest

TYPE_CHECKING = False  # typing stays unimported at run time (the warm recall's start-up)
if TYPE_CHECKING:
    from typing import Any, Protocol

    class Judge(Protocol):
        """Answers about a query commit (what Git knows)."""

        def is_commit(self, commit: str) -> bool:
            """Whether the query commit names a commit object."""

        def policy(self, commit: str) -> PolicyContext:
            """The policy in the commit's tree (§15.2)."""

        def reach(self, index: MemoryIndex, commit: str) -> int:
            """The bitmap of the anchor IDs the commit reaches (itself and its ancestors)."""


_MAX_LISTED = 400  # anchors listed in a view; past it the other list is used if shorter


class NotKept(Exception):
    """The index keeps no answer for this query commit yet: ask Git."""


_PARSED: dict[bytes, PolicyContext] = {}


def parsed_policy(commit: str, blob: bytes | None) -> PolicyContext:
    """The policy context of a policy blob (None: absent) at ``commit``, parsed once per blob.

    Raises:
        InvalidInput: ``invalid-policy``.
    """
    parsed = _PARSED.get(blob or b"\x00absent")
    if parsed is None:
        parsed = policy_context(commit, blob)
        if len(_PARSED) > 64:
            _PARSED.clear()
        _PARSED[blob or b"\x00absent"] = parsed
    return PolicyContext(commit, parsed.digest, parsed.memory)


class KeptJudge:
    """Answers only from what the index kept for a query commit; :class:`NotKept` otherwise."""

    def __init__(self, index: MemoryIndex) -> None:
        self._index = index

    def is_commit(self, commit: str) -> bool:
        """Kept reach sets are only ever kept for commits."""
        if self._index.reach(commit) is None:
            raise NotKept(commit)
        return True

    def policy(self, commit: str) -> PolicyContext:
        """The kept policy blob, parsed.

        Raises:
            NotKept: none is kept.
        """
        kept = self._index.kept_policy(commit)
        if kept is None:
            raise NotKept(commit)
        _tree, present, blob = kept
        return parsed_policy(commit, blob if present else None)

    def reach(self, index: MemoryIndex, commit: str) -> int:
        """The kept reach set, when it covers every anchor.

        Raises:
            NotKept: none is kept, or anchors were added since.
        """
        kept = index.reach(commit)
        if kept is None or kept[0] != index.last_anchor():
            raise NotKept(commit)
        return kept[1]


@dataclass(frozen=True, slots=True)
class QueryContext:
    """One request's query context: the index view and the per-row checks."""

    request: RecallRequest
    policy: PolicyContext
    selection: Selection
    view: View
    reach: int  # bitmap of the anchor IDs the query commit reaches
    source_fingerprint: str

    def trust(self, values: Any) -> str:
        """The trust class of a stored row under the policy at the query commit (§15.1)."""
        return self.policy.trust(str(values[COLUMN["actor"]]), str(values[COLUMN["kind"]]))

    def admits(self, values: Any, anchors: Mapping[str, Anchor]) -> bool:
        """Whether MAC-checked row ``values`` pass every filter but the postings at this
        context: eligibility, applicability at the query commit, lifecycle, kind, actor,
        trust and subject (so tampered keys cannot smuggle in a row the filters exclude).
        ``anchors`` holds the MAC-checked anchors of the rows' anchor commits
        (:meth:`MemoryIndex.anchors_at`)."""
        request = self.request
        actor, kind = str(values[COLUMN["actor"]]), str(values[COLUMN["kind"]])
        anchor_subject = str(values[COLUMN["anchor_subject"]])
        if not self.view.live or not eligible(values):
            return False
        if self.selection.ranks and int(values[COLUMN["lifecycle_rank"]]) not in (
            self.selection.ranks
        ):
            return False
        if (request.kind and kind not in request.kind) or (
            request.actor and actor not in request.actor
        ):
            return False
        if request.trust and self.trust(values) not in request.trust:
            return False
        if request.subject and anchor_subject != request.subject:
            return False
        mode = MODE_CODE.get(str(values[COLUMN["mode"]]))
        commit = str(values[COLUMN["anchor"]])
        if mode == MODE_CODE["exact"]:
            return commit == request.at_commit
        if mode == MODE_CODE["subject"]:
            return bool(request.subject)
        anchor = anchors.get(commit)
        return anchor is not None and bool(self.reach >> anchor.aid & 1)


def _classes(
    index: MemoryIndex, request: RecallRequest, policy: PolicyContext
) -> frozenset[int] | None:
    if not (request.kind or request.actor or request.trust):
        return None
    out = set()
    for slot, actor in index.actor_slots():
        if request.actor and actor not in request.actor:
            continue
        for kind in KINDS:
            if request.kind and kind not in request.kind:
                continue
            if request.trust and policy.trust(actor, kind) not in request.trust:
                continue
            out.add(class_of(slot, kind))
    return frozenset(out)


def _bits(bits: int) -> list[int]:
    out = []
    while bits:
        low = bits & -bits
        out.append(low.bit_length() - 1)
        bits ^= low
    return out


def context_for(
    judge: Judge, index: MemoryIndex, request: RecallRequest, *, lexical: bool
) -> QueryContext:
    """Judge the query context of ``request`` over an open, current index (``lexical``: its
    query terms are postings, as in recall; grep has none).

    Raises:
        InvalidInput: ``invalid-policy``.
        IndexTampered: a kept answer or an anchor failed its check (rebuild and ask again).
        NotKept: the judge keeps no answer (only :class:`KeptJudge`).
    """
    policy = judge.policy(request.at_commit)
    sel = selection(
        lifecycles=request.lifecycle,
        topics=request.topic,
        tokens=request.query_tokens() if lexical else (),
        path=request.path,
        subject=request.subject,
    )
    fingerprint = index.state.fingerprint(policy.digest)
    if not judge.is_commit(request.at_commit):
        return QueryContext(request, policy, sel, View(False, frozenset()), 0, fingerprint)
    reach = judge.reach(index, request.at_commit)
    last = index.last_anchor()
    unreached = ((1 << (last + 1)) - 2) & ~reach  # anchor IDs are 1..last
    excluded: tuple[tuple[int, str], ...] = ()
    only: tuple[tuple[int, str], ...] | None = None
    if unreached:
        missed = [(a.aid, a.commit) for a in index.anchors(_bits(unreached)) if a.n_desc]
        if len(missed) > _MAX_LISTED and reach.bit_count() < len(missed):
            only = tuple((a.aid, a.commit) for a in index.anchors(_bits(reach)) if a.n_desc)
        else:
            excluded = tuple(missed)
    here = index.anchor_at(request.at_commit)
    exact = (here.aid, here.commit) if here is not None and here.n_exact else None
    view = View(
        live=True,
        classes=_classes(index, request, policy),
        desc_except=excluded,
        desc_only=only,
        exact=exact,
        subject=bool(request.subject),
    )
    return QueryContext(request, policy, sel, view, reach, fingerprint)


__all__ = ["KeptJudge", "NotKept", "QueryContext", "context_for", "parsed_policy"]
