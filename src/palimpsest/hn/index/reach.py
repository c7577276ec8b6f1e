"""Which anchor commits a query commit reaches: descendants applicability at query time (§13).

A ``descendants`` row applies at a query commit when its anchor is that commit or one of its
ancestors, walking exact parent objects.  The answer depends only on the query commit and the
set of anchors, so it is computed once per query commit and kept in the index (``reach``: a
bitmap over anchor IDs, MAC-signed): the first recall after a commit walks from the new commit
only until it meets a commit whose answer is kept (usually its parent) and takes that answer
for everything below it.  Anchors added since an answer was kept are checked one by one (a new
anchor is nearly always a newer commit, which libgit2's ancestry test settles at once).

A walk that meets a missing commit (a shallow or partial history) is not kept: rows anchored
beyond it are not applicable (``anchor-missing``), and the next recall walks again, so a fetch
that completes the history is seen.
"""

from __future__ import annotations

from typing import Protocol

from palimpsest.hn.index.core import MemoryIndex


class AncestryProbe(Protocol):
    """What the walk asks Git (implemented by :class:`palimpsest.hn.store.RepoProbe`)."""

    def parents(self, commit: str) -> tuple[str, ...] | None:
        """Parent IDs of a commit, or None when it is missing (or not a commit)."""

    def descends(self, commit: str, ancestor: str) -> bool | None:
        """Whether ``ancestor`` is a proper ancestor of ``commit``; None when Git cannot tell
        (a commit on the way is missing)."""


def reach_of(index: MemoryIndex, probe: AncestryProbe, commit: str) -> int:
    """The bitmap (bit ``aid``) of the anchors ``commit`` reaches: itself and its ancestors.

    ``commit`` must be a commit object (a missing query commit reaches nothing, §13 step 3).

    Raises:
        IndexTampered: a kept answer or an anchor row failed its check.
    """
    last = index.last_anchor()
    kept = index.reach(commit)
    if kept is not None:
        upto, bits = kept
        if upto == last:
            return bits
        extended = _extend(index, probe, commit, upto, bits)
        if extended is not None:
            index.remember_reach(commit, last, extended)
            return extended
    bits, complete = walk_reach(index, probe, commit, use_kept=True)
    if complete:
        index.remember_reach(commit, last, bits)
    return bits


def _extend(
    index: MemoryIndex, probe: AncestryProbe, commit: str, upto: int, bits: int
) -> int | None:
    """``bits`` with the anchors added after ``upto`` that ``commit`` reaches; None when Git
    cannot tell for one of them."""
    for anchor in index.anchors(after=upto):
        if anchor.state != "commit":
            # Not a commit: nothing reaches it.  Missing: no row anchored there applies, and
            # its arrival clears every kept answer.
            continue
        if anchor.commit == commit:
            bits |= 1 << anchor.aid
            continue
        below = probe.descends(commit, anchor.commit)
        if below is None:
            return None
        if below:
            bits |= 1 << anchor.aid
    return bits


def walk_reach(
    index: MemoryIndex, probe: AncestryProbe, commit: str, *, use_kept: bool
) -> tuple[int, bool]:
    """Walk parents from ``commit`` (stopping at commits whose answer is kept, with
    ``use_kept``); return the bitmap and whether the walk met no missing commit."""
    anchors = {a.commit: a.aid for a in index.anchors()}
    last = index.last_anchor()
    kept = set(index.reach_commits()) if use_kept else set()
    kept.discard(commit)
    bits = 0
    complete = True
    seen = {commit}
    stack = [commit]
    while stack:
        current = stack.pop()
        if current in kept:
            found = index.reach(current)
            if found is not None:
                upto, below = found
                extended = below if upto == last else _extend(index, probe, current, upto, below)
                if extended is not None:
                    bits |= extended
                    continue
        parents = probe.parents(current)
        if parents is None:  # missing: neither it nor anything below it is reachable
            complete = False
            continue
        aid = anchors.get(current)
        if aid is not None:
            bits |= 1 << aid
        for parent in parents:
            if parent not in seen:
                seen.add(parent)
                stack.append(parent)
    return bits, complete


__all__ = ["AncestryProbe", "reach_of", "walk_reach"]
