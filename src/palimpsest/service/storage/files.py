"""Uploaded files (content-addressed bytes under ``files/`` plus their rows) and small documents.

A base of :class:`~palimpsest.service.storage.sqlite.SqliteStore`, split out so that module
keeps to the tree, history and projections. Like :mod:`.principals` it runs statements on the
store's connection and never opens a transaction itself: callers hold ``write`` or ``read``.
Bytes are written (fsync + atomic rename) before the row that names them commits, so a crash
can leave unnamed bytes behind but never a row without its bytes.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path
from typing import Any

from palimpsest import canonical
from palimpsest.service.storage.rows import StoredFile
from palimpsest.service.storage.schema import Statements, load


def private_dir(path: Path) -> None:
    """Create ``path`` if needed and make it 0700 whatever the umask (also one made loose by
    an older build): the store's directories are readable by their owner only."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    with contextlib.suppress(PermissionError):  # not ours to change: leave it as it is
        if path.stat().st_mode & 0o777 != 0o700:
            path.chmod(0o700)


def private_file(path: Path) -> None:
    """Create ``path`` if needed and make it 0600 whatever the umask (SQLite gives its -wal
    and -shm files the mode of the database file)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        with contextlib.suppress(PermissionError):
            os.fchmod(fd, 0o600)
    finally:
        os.close(fd)


class FileRows(Statements):
    """Statement helpers over ``_db`` for the ``files`` and ``docs`` tables."""

    data_dir: Path

    # --- files ----------------------------------------------------------------------------
    def file_path(self, sha256: str) -> Path:
        """Where the bytes with this digest live."""
        return self.data_dir / "files" / sha256[:2] / sha256

    def put_file_bytes(self, data: bytes) -> str:
        """Write bytes content-addressed (fsync + atomic rename); returns their sha256."""
        sha = hashlib.sha256(data).hexdigest()
        path = self.file_path(sha)
        if path.exists():
            return sha
        private_dir(path.parent)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        return sha

    def read_file_bytes(self, sha256: str) -> bytes | None:
        """The bytes, or ``None`` once erased."""
        try:
            return self.file_path(sha256).read_bytes()
        except FileNotFoundError:
            return None

    def delete_file_bytes(self, sha256: str) -> None:
        """Remove bytes no longer named by any file."""
        if self._one("SELECT 1 FROM files WHERE sha256=?", (sha256,)) is None:
            self.file_path(sha256).unlink(missing_ok=True)

    def insert_file(self, fid: str, sha: str, name: str, media_type: str, size: int,  # noqa: PLR0917
                    created_by: str, now: int) -> None:
        """Register an uploaded file."""
        self._x("INSERT INTO files VALUES (?,?,?,?,?,?,?)",
                (fid, sha, name, media_type, size, created_by, now))

    def file(self, fid: str) -> StoredFile | None:
        """One uploaded file."""
        r = self._one("SELECT id, sha256, name, media_type, bytes, created_by, created_at "
                      "FROM files WHERE id=?", (fid,))
        return StoredFile(*tuple(r)) if r is not None else None

    def delete_file(self, fid: str) -> None:
        """Forget an uploaded file's row (its bytes go when no row names them)."""
        row = self.file(fid)
        self._x("DELETE FROM files WHERE id=?", (fid,))
        if row is not None:
            self.delete_file_bytes(row.sha256)

    # --- documents ------------------------------------------------------------------------
    def put_doc(self, kind: str, did: str, memory_id: str | None, created_at: int,
                doc: Any) -> None:
        """Insert or replace a small document."""
        self._x("INSERT INTO docs VALUES (?,?,?,?,?) ON CONFLICT(kind, id) DO UPDATE SET "
                "doc=excluded.doc", (kind, did, memory_id, created_at, canonical.encode(doc)))

    def doc(self, kind: str, did: str) -> tuple[str | None, Any] | None:
        """``(memory_id, doc)`` or ``None``."""
        r = self._one("SELECT memory_id, doc FROM docs WHERE kind=? AND id=?", (kind, did))
        return (r["memory_id"], load(r["doc"])) if r else None

    def docs(self, kind: str, memory_id: str) -> list[Any]:
        """Documents of one kind for a memory, newest first."""
        return [load(r["doc"]) for r in self._q(
            "SELECT doc FROM docs WHERE kind=? AND memory_id=? ORDER BY created_at DESC, "
            "rowid DESC", (kind, memory_id))]

    # --- mounted repositories (a memory whose records a repository's streams keep) -----------
    def mount_repository(self, memory_id: str, provider: str, path: str, now: int) -> None:
        """Make ``provider`` (a repository's streams at ``path``) keep a memory's records: the
        memory's provider and its mount row change together, inside a write."""
        self._x("UPDATE memories SET provider=?, updated_at=? WHERE id=?",
                (provider, now, memory_id))
        self.put_doc("mount", memory_id, memory_id, now, {"path": path})
        self._x("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key='tree_gen'")

    def mounts(self) -> dict[str, str]:
        """The repository path of every mounted memory, by memory id."""
        return {r["id"]: load(r["doc"])["path"]
                for r in self._q("SELECT id, doc FROM docs WHERE kind='mount'")}


__all__ = ["FileRows", "private_dir", "private_file"]
