"""Read-only repository questions for ``hn-memory/0``: the probes projection asks (object and
commit states, paths at a commit, parents), the policy blob at a commit, and revision
resolution.

Split out of :mod:`palimpsest.hn.store` (which re-exports every name here); like it, it reads
Git through pygit2 and never changes a ref.  Rules and section numbers refer to
shared/reference/hn-memory-v0.md.
"""

from __future__ import annotations

import pygit2

from palimpsest.errors import InvalidInput

POLICY_PATH = ".hn/policy.json"
_HEX_LEN = 40
_OBJ_COMMIT = pygit2.enums.ObjectType.COMMIT
_OBJ_BLOB = pygit2.enums.ObjectType.BLOB
_OBJ_TREE = pygit2.enums.ObjectType.TREE


class RepoProbe:
    """Read-only repository questions for projection (satisfies ``projection.Probe``)."""

    def __init__(self, repo: pygit2.Repository) -> None:
        self._repo = repo

    def _oid(self, hexid: str) -> pygit2.Oid | None:
        # libgit2 as bundled with pygit2 opens SHA-1 repositories only (open_repository refuses
        # SHA-256 ones), so a 64-hex ID can never name an object here.
        if len(hexid) != _HEX_LEN:
            return None
        try:
            return pygit2.Oid(hex=hexid)
        except (ValueError, TypeError):
            return None

    def object_state(self, hexid: str) -> str:
        """``present``, ``missing`` or ``error`` (ID of the wrong hash length)."""
        oid = self._oid(hexid)
        if oid is None:
            return "error"
        try:
            return "present" if oid in self._repo.odb else "missing"
        except pygit2.GitError:
            return "error"

    def commit_state(self, hexid: str) -> str:
        """``commit``, ``missing`` or ``not-commit``."""
        oid = self._oid(hexid)
        if oid is None:
            return "not-commit"
        try:
            kind, _size = self._repo.odb.read_header(oid)
        except (KeyError, pygit2.GitError):
            return "missing"
        return "commit" if kind == _OBJ_COMMIT else "not-commit"

    def path_entry(self, commit: str, path: str) -> tuple[str, str] | None:
        """``(type, object ID)`` of ``path`` in the commit's tree, or None when absent."""
        obj = self._repo[pygit2.Oid(hex=commit)]
        try:
            entry = obj.tree[path]
        except KeyError:
            return None
        kind = "blob" if entry.type == _OBJ_BLOB else ("tree" if entry.type == _OBJ_TREE else "x")
        return kind, str(entry.id)

    def parents(self, commit: str) -> tuple[str, ...] | None:
        """Parent IDs of a commit, or None when the commit object is missing."""
        oid = self._oid(commit)
        if oid is None:
            return None
        try:
            obj = self._repo[oid]
        except (KeyError, pygit2.GitError):
            return None
        if obj.type != _OBJ_COMMIT:
            return None
        return tuple(str(p) for p in obj.parent_ids)  # type: ignore[attr-defined]

    def descends(self, commit: str, ancestor: str) -> bool | None:
        """Whether ``ancestor`` is a proper ancestor of ``commit`` (libgit2's graph walk, in C);
        None when it cannot tell (an object on the way is missing or the IDs are not
        commits)."""
        first, second = self._oid(commit), self._oid(ancestor)
        if first is None or second is None:
            return None
        try:
            return bool(self._repo.descendant_of(first, second))
        except (KeyError, ValueError, pygit2.GitError):
            return None

    def has_event(self, event_id: str) -> bool:
        """Accepted ``hn/0`` collaboration events: this project carries none (§14)."""
        return False


def policy_blob(repo: pygit2.Repository, commit: str) -> bytes | None:
    """The bytes of ``.hn/policy.json`` in the tree of ``commit``, or None when absent.

    Raises:
        InvalidInput: the path exists but is not a blob (an invalid policy), or ``commit``
            names another kind of object.
        KeyError: ``commit`` is not in the repository.
    """
    return policy_at(repo, commit)[1]


def policy_at(repo: pygit2.Repository, commit: str) -> tuple[str, bytes | None]:
    """The ID of the ``.hn`` tree in ``commit`` ("" when there is none) and the bytes of
    ``.hn/policy.json`` there (None when absent).

    Raises:
        InvalidInput: as :func:`policy_blob`.
        KeyError: ``commit`` is not in the repository.
    """
    obj = repo[pygit2.Oid(hex=commit)]
    if obj.type != _OBJ_COMMIT:
        raise InvalidInput(
            f"query commit {commit} is not a commit", code="invalid-revision",
            hint="name a commit with --at (or atCommit)",
        )  # fmt: skip
    tree = obj.tree
    try:
        hn = tree[POLICY_PATH.split("/", maxsplit=1)[0]]
    except KeyError:
        return "", None
    tree_id = str(hn.id) if hn.type == _OBJ_TREE else ""
    try:
        entry = tree[POLICY_PATH]
    except KeyError:
        return tree_id, None
    if entry.type != _OBJ_BLOB:
        raise InvalidInput(".hn/policy.json is not a file", code="invalid-policy")
    data: bytes = repo.odb.read(entry.id)[1]
    return tree_id, data


def resolve_commit(repo: pygit2.Repository, rev: str) -> str:
    """Resolve a revision (``HEAD``, a branch, a full or short ID) to a full commit ID.

    Raises:
        InvalidInput: ``invalid-revision`` when it names nothing or no commit.
    """
    try:
        obj = repo.revparse_single(rev)
        commit = obj.peel(pygit2.Commit)
    except (KeyError, ValueError, pygit2.GitError, pygit2.InvalidSpecError) as exc:
        raise InvalidInput(
            f"revision {rev!r} does not name a commit", code="invalid-revision"
        ) from exc
    return str(commit.id)


__all__ = ["POLICY_PATH", "RepoProbe", "policy_at", "policy_blob", "resolve_commit"]
