"""The warm recall: answered from the index alone, without Git and without starting libgit2.

When the memory ref files show nothing changed since the index was brought up to date (their
heads digest is the index's, no row waits for a missing object) and the index keeps the
answers for the query commit (what it reaches, its policy blob), a recall needs no Git read:
:func:`recall_kept` answers it.  Otherwise it returns None and the caller runs
:func:`palimpsest.hn.recall.run.recall`, which asks Git and keeps the answers.  Both give the
same bytes (a test compares them over changing histories).

Only light modules are imported here: the standard library, SQLite, the index's schema and
queries, and the ref file reader (:mod:`palimpsest.hn.store.gitfiles`).
"""

from __future__ import annotations

import sqlite3

from palimpsest.hn.index.core import index_error, open_current
from palimpsest.hn.index.schema import IndexTampered
from palimpsest.hn.recall.context import KeptJudge, NotKept
from palimpsest.hn.recall.pages import RecallResult, answer_recall
from palimpsest.hn.recall.request import RecallRequest
from palimpsest.hn.store.gitfiles import GitDir, memory_refs


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
            return answer_recall(index, KeptJudge(index), request, explain=explain)
    except (NotKept, IndexTampered):
        return None
    except sqlite3.Error as exc:
        raise index_error(exc) from exc


__all__ = ["recall_kept"]
