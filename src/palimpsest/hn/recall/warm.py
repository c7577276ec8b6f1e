"""The warm recall: answered from the index alone, without Git and without starting libgit2.

When the memory ref files show nothing changed since the index was brought up to date (their
heads digest is the index's, no row waits for a missing object), a recall needs Git only for
the query commit: whether it is a commit, what it reaches, the policy in its tree.  The index
keeps those per commit; for a commit it does not keep yet — the usual case right after
``git commit`` — :class:`WarmJudge` reads the commit's own loose objects (its parents, its
root tree and, when the ``.hn`` tree changed, the policy) and takes the rest from what is kept
for its parents.  Anything else (a packed object, a parent not kept, an anchor added since
whose ancestry only a walk can settle) returns None, and the caller runs
:func:`palimpsest.hn.recall.run.recall`, which asks libgit2 and keeps the answers.  Both give
the same bytes (a test compares them over changing histories).

Only light modules are imported here: the standard library, SQLite, the index's schema and
queries, the ref file reader (:mod:`palimpsest.hn.store.headfiles`) and the loose object reader
(:mod:`palimpsest.hn.store.objects`).
"""

from __future__ import annotations

import sqlite3

from palimpsest.hn.index.core import MemoryIndex, index_error, open_current
from palimpsest.hn.index.schema import IndexTampered
from palimpsest.hn.policy import PolicyContext
from palimpsest.hn.recall.context import KeptJudge, NotKept, parsed_policy
from palimpsest.hn.recall.pages import RecallResult, answer_recall
from palimpsest.hn.recall.request import RecallRequest
from palimpsest.hn.store.headfiles import GitDir, memory_refs
from palimpsest.hn.store.objects import BLOB, COMMIT, TREE, Damaged, read_loose, tree_entries

_TREE_MODE = b"40000"
_BLOB_MODES = (b"100644", b"100755")


class WarmJudge(KeptJudge):
    """What the index keeps, else a new commit's loose objects on top of what it keeps for
    the commit's parents (:class:`NotKept` for anything else); what it learns is kept."""

    def __init__(self, index: MemoryIndex, objects: str) -> None:
        super().__init__(index)
        self._objects = objects  # ".../objects/"

    def _object(self, hexid: str, kind: int) -> bytes:
        try:
            found = read_loose(self._objects, bytes.fromhex(hexid))
        except (Damaged, ValueError) as exc:
            raise NotKept(hexid) from exc
        if found is None or found[0] != kind:
            raise NotKept(hexid)
        return found[1]

    def _commit(self, commit: str) -> tuple[str, list[str]]:
        raw = self._object(commit, COMMIT)
        lines = raw.split(b"\n")
        if not lines[0].startswith(b"tree "):
            raise NotKept(commit)
        parents = []
        for line in lines[1:]:
            if not line.startswith(b"parent "):
                break
            parents.append(line[len(b"parent ") :].decode("ascii"))
        return lines[0][len(b"tree ") :].decode("ascii"), parents

    def is_commit(self, commit: str) -> bool:
        """Kept, or a loose commit object (anything else: ask libgit2)."""
        try:
            return super().is_commit(commit)
        except NotKept:
            self._commit(commit)
            return True

    def policy(self, commit: str) -> PolicyContext:
        """Kept; or read from the commit's root tree (reusing a kept blob when the ``.hn``
        tree is one seen before) and kept."""
        try:
            return super().policy(commit)
        except NotKept:
            pass
        root, _parents = self._commit(commit)
        entries = {name: (mode, oid) for mode, name, oid in tree_entries(self._object(root, TREE))}
        found = entries.get(b".hn")
        tree_id, blob = "", None
        if found is not None:
            mode, oid = found
            if mode != _TREE_MODE:
                raise NotKept(commit)  # a file or link named .hn: libgit2 decides
            tree_id = oid.hex()
            reused = self._index.policy_of_tree(tree_id)
            if reused is not None:
                blob = reused[2] if reused[1] else None
            else:
                inner = {n: (m, o) for m, n, o in tree_entries(self._object(tree_id, TREE))}
                policy = inner.get(b"policy.json")
                if policy is not None:
                    if policy[0] not in _BLOB_MODES:
                        raise NotKept(commit)
                    blob = self._object(policy[1].hex(), BLOB)
        self._index.keep_policy(commit, tree_id, blob)
        return parsed_policy(commit, blob)

    def reach(self, index: MemoryIndex, commit: str) -> int:
        """Kept; or the commit itself plus what is kept for each of its parents (and kept)."""
        try:
            return super().reach(index, commit)
        except NotKept:
            pass
        _root, parents = self._commit(commit)
        last = index.last_anchor()
        bits = 0
        for parent in parents:
            kept = index.reach(parent)
            if kept is None:
                raise NotKept(parent)
            upto, below = kept
            # An anchor added since is settled only when it is this commit (never an ancestor
            # of its parent); any other needs an ancestry walk.
            if any(a.commit != commit for a in index.anchors(after=upto) if a.state == "commit"):
                raise NotKept(parent)
            bits |= below
        here = index.anchor_at(commit)
        if here is not None and here.state == "commit":
            bits |= 1 << here.aid
        index.remember_reach(commit, last, bits)
        return bits



def recall_kept(
    git_dir: GitDir, request: RecallRequest, *, explain: bool = False
) -> RecallResult | None:
    """The answer :func:`palimpsest.hn.recall.run.recall` gives, read without Git (see the
    module doc), or None when Git must be asked (a memory ref moved, an object is awaited, the
    query commit is new).

    Raises:
        InvalidInput: a bad cursor or a record over the byte bound (as the Git path).
        Unavailable: ``index-unsafe`` or ``index-unavailable``.
    """
    heads = memory_refs(git_dir)
    if heads is None:
        return None
    try:
        index = open_current(git_dir.path, heads)
        if index is None:
            return None
        with index:
            judge = WarmJudge(index, git_dir.common + "/objects/")
            return answer_recall(index, judge, request, explain=explain)
    except (NotKept, IndexTampered):
        return None
    except sqlite3.Error as exc:
        raise index_error(exc) from exc


__all__ = ["WarmJudge", "recall_kept"]
