"""Raw object reads for the stream reader: loose objects directly, everything else by libgit2.

A memory costs the reader four object reads (commit, tree, two blobs) and, in a store written by
appends, each is a loose object.  libgit2 spends five system calls on one (``access``, ``stat``,
``open``, ``read``, ``close``); reading the file here takes three, which is about a third of the
reader's time outside the signature check.  The object is checked as libgit2 checks it: the
zlib stream inflates completely to ``<type> <size>\\0<content>`` with the size it declares, and
the SHA-1 of that must be the object's ID.  No such file (a packed object, an alternate object
store, a SHA-256 repository) is read through libgit2, so the answer (or the error) is the one
libgit2 gives.  A loose file that fails a check is looked up in the packs only, and otherwise
is an error: libgit2 1.9 never returns from reading a truncated loose object.
"""

from __future__ import annotations

import hashlib
import os
import zlib
from pathlib import Path

TYPE_CHECKING = False  # typing stays unimported at run time (the warm recall's start-up)
if TYPE_CHECKING:
    import pygit2

_TYPES = {b"commit": 1, b"tree": 2, b"blob": 3, b"tag": 4}  # pygit2.enums.ObjectType values
_CHUNK = 16384  # one read for nearly every memory object; larger ones loop
_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def _objects_dir(repo: pygit2.Repository) -> str | None:
    git_dir = Path(repo.path)
    common = git_dir / "commondir"  # a linked worktree keeps its objects in the common dir
    try:
        if common.is_file():
            git_dir = (git_dir / common.read_text("utf-8").strip()).resolve()
    except (OSError, UnicodeDecodeError):
        return None
    objects = git_dir / "objects"
    return str(objects) + "/" if objects.is_dir() else None


class Damaged(Exception):
    """A loose object file that does not hold the object its name says."""


COMMIT, TREE, BLOB = 1, 2, 3


def read_loose(directory: str, raw_id: bytes) -> tuple[int, bytes] | None:
    """The type and content of a loose object under ``directory`` (``…/objects/``); None when
    there is no such file.  Standard library only (no libgit2).

    Raises:
        Damaged: the file does not hold the object its name says.
    """
    hexid = raw_id.hex()
    try:
        fd = os.open(directory + hexid[:2] + "/" + hexid[2:], _FLAGS)
    except OSError:
        return None
    try:
        raw = os.read(fd, _CHUNK)
        if len(raw) == _CHUNK:
            rest = [raw]
            while chunk := os.read(fd, 1 << 20):
                rest.append(chunk)
            raw = b"".join(rest)
        data = zlib.decompress(raw)
    except (OSError, zlib.error):
        raise Damaged from None
    finally:
        os.close(fd)
    nul = data.find(b"\0", 0, 32)
    kind, _, size = data[:nul].partition(b" ")
    code = _TYPES.get(kind)
    if nul < 0 or code is None or size != str(len(data) - nul - 1).encode():
        raise Damaged
    if hashlib.sha1(data).digest() != raw_id:  # noqa: S324 - Git's object ID, not a MAC
        raise Damaged
    return code, data[nul + 1 :]


def tree_entries(data: bytes) -> list[tuple[bytes, bytes, bytes]]:
    """``(mode, name, binary ID)`` of each entry of a raw SHA-1 tree object.

    Raises:
        Damaged: the bytes are not a tree.
    """
    out = []
    pos = 0
    while pos < len(data):
        space = data.find(b" ", pos)
        nul = data.find(b"\0", space + 1)
        if space < 0 or nul < 0 or nul + 21 > len(data):
            raise Damaged
        out.append((data[pos:space], data[space + 1 : nul], data[nul + 1 : nul + 21]))
        pos = nul + 21
    return out


class ObjectReader:
    """``read(raw ID) -> (type, bytes)`` with the semantics of ``pygit2.Odb.read``."""

    def __init__(self, repo: pygit2.Repository) -> None:
        self._odb_read = repo.odb.read
        self._dir = _objects_dir(repo)
        self._packs: pygit2.Odb | None = None

    def read(self, raw_id: bytes) -> tuple[int, bytes]:
        """The type and content of the object whose binary ID is ``raw_id``.

        Raises:
            KeyError: the object does not exist (as libgit2 raises it).
            pygit2.GitError: libgit2 could not read it.
        """
        if self._dir is not None:
            try:
                found = read_loose(self._dir, raw_id)
            except Damaged:
                return self._packed(self._dir, raw_id)
            if found is not None:
                return found
        import pygit2  # noqa: PLC0415 - libgit2 only for what is not loose

        kind, data = self._odb_read(pygit2.Oid(raw_id))
        return int(kind), data

    def _packed(self, directory: str, raw_id: bytes) -> tuple[int, bytes]:
        import pygit2  # noqa: PLC0415

        if self._packs is None:
            self._packs = pygit2.Odb()
            self._packs.add_backend(pygit2.OdbBackendPack(directory), 1)
        try:
            kind, data = self._packs.read(pygit2.Oid(raw_id))
        except KeyError as exc:
            raise pygit2.GitError(f"loose object {raw_id.hex()} is damaged") from exc
        return int(kind), data


__all__ = ["BLOB", "COMMIT", "TREE", "Damaged", "ObjectReader", "read_loose", "tree_entries"]
