"""Running ``recall`` and ``grep`` against a repository (§16, §23).

:func:`recall` and :func:`grep` bring the private index up to date with the verified refs
first (through Git: libgit2), judge the query context with :class:`GitJudge` (which keeps what
a query commit reaches and the policy there in the index) and answer
(:mod:`palimpsest.hn.recall.pages`).  A row that fails its integrity check rebuilds the index
and the request is answered again, once.

:func:`palimpsest.hn.recall.warm.recall_kept` answers a warm recall without Git; this module is
what it falls back to.

Nothing here writes Git: no fetch, no ref update, no event append.  The only writes are to the
disposable index below ``.git/hn/memory``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from palimpsest.errors import InvalidInput, Unavailable
from palimpsest.hn import store
from palimpsest.hn.index.core import MemoryIndex
from palimpsest.hn.index.reach import reach_of
from palimpsest.hn.index.schema import IndexTampered, Progress
from palimpsest.hn.index.update import guarded, open_index
from palimpsest.hn.policy import PolicyContext
from palimpsest.hn.recall.context import parsed_policy
from palimpsest.hn.recall.pages import RecallResult, answer_grep, answer_recall
from palimpsest.hn.recall.request import RecallRequest
from palimpsest.search.regex import compile_pattern

if TYPE_CHECKING:
    import pygit2


class GitJudge:
    """Answers about a query commit from Git, keeping them in the index for the next recall."""

    def __init__(self, repo: pygit2.Repository, index: MemoryIndex | None = None) -> None:
        self._repo = repo
        self._probe = store.RepoProbe(repo)
        self._index = index

    def is_commit(self, commit: str) -> bool:
        """Whether the query commit names a commit object."""
        return self._probe.commit_state(commit) == "commit"

    def policy(self, commit: str) -> PolicyContext:
        """The policy in the commit's tree, parsed once per blob (and kept in the index).

        Raises:
            InvalidInput: ``invalid-policy``, or the commit names another kind of object.
            KeyError: the commit is not in the repository.
        """
        tree_id, blob = store.policy_at(self._repo, commit)
        context = parsed_policy(commit, blob)
        if self._index is not None:
            kept = self._index.kept_policy(commit)
            if kept != (tree_id, blob is not None, blob or b""):
                self._index.keep_policy(commit, tree_id, blob)
        return context

    def reach(self, index: MemoryIndex, commit: str) -> int:
        """The anchors the commit reaches (walked once per commit, then kept)."""
        return reach_of(index, self._probe, commit)


def _tamper_error() -> Unavailable:
    return Unavailable(
        "memory index corrupt: a row failed its integrity check after a rebuild",
        code="index-corrupt",
        hint="delete .git/hn/memory and retry",
    )


def recall(
    repo: pygit2.Repository,
    request: RecallRequest,
    *,
    progress: Progress | None = None,
    explain: bool = False,
) -> RecallResult:
    """Answer a normalised recall request (§16).

    ``progress`` hears about a long index build; ``explain`` also counts what the trust and
    lifecycle filters left out (:class:`~palimpsest.hn.recall.pages.LeftOut`, for human
    output).

    Raises:
        InvalidInput: bad cursor, a record larger than the byte bound, invalid policy or stream.
        Unavailable: the index could not be made trustworthy.
    """
    for rebuild in (False, True):
        try:
            with guarded():
                GitJudge(repo).policy(request.at_commit)  # a bad policy fails before any build
                with open_index(repo, rebuild=rebuild, progress=progress) as index:
                    return answer_recall(index, GitJudge(repo, index), request, explain=explain)
        except IndexTampered as exc:
            if rebuild:
                raise _tamper_error() from exc
    raise AssertionError("unreachable")  # pragma: no cover


def grep(
    repo: pygit2.Repository,
    request: RecallRequest,
    raw_pattern: bytes,
    *,
    ignore_case: bool,
    progress: Progress | None = None,
) -> RecallResult:
    """Explicit regex search over the verified selection (§23).

    The pattern is checked completely (UTF-8, bytes, estimate, compiled size) before the index
    is opened; the work limit is checked over the whole eligible selection before matching.

    Raises:
        InvalidInput: a refused pattern, the work limit, a bad cursor or an oversized record.
    """
    if request.query:
        raise InvalidInput("grep has no --query; use recall for lexical terms", code="usage")
    pattern = compile_pattern(raw_pattern, ignore_case=ignore_case)
    for rebuild in (False, True):
        try:
            with guarded():
                GitJudge(repo).policy(request.at_commit)
                with open_index(repo, rebuild=rebuild, progress=progress) as index:
                    return answer_grep(index, GitJudge(repo, index), request, pattern)
        except IndexTampered as exc:
            if rebuild:
                raise _tamper_error() from exc
    raise AssertionError("unreachable")  # pragma: no cover


__all__ = ["GitJudge", "grep", "recall"]
