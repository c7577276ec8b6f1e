"""Bringing the private index up to date with the memory refs, through Git (libgit2).

Incremental rule: when a stream head moves forward, only the new commits of that stream are
read and verified (:func:`palimpsest.hn.store.load_stream_since`); the rows whose answers can
change — the new rows, the targets of new relationships, rows whose relationships or memory
evidence name a new memory — are re-projected over exactly the memories those answers depend
on; so are rows judged with an anchor commit or ``git:`` evidence object that was missing and is
present now (probed on every open).  Anything else (a ref rewritten or deleted, a damaged or
foreign file, another format) rebuilds the whole index from Git, streaming
(:mod:`palimpsest.hn.index.build`).  A property test checks the answers against a from-scratch
projection.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path

import pygit2

from palimpsest.errors import Unavailable
from palimpsest.hn import store
from palimpsest.hn.envelope import VerifiedMemory
from palimpsest.hn.index.build import build
from palimpsest.hn.index.core import (
    MemoryIndex,
    cached_connection,
    connect,
    forget,
    index_error,
    meta_of,
    open_existing,
    remember,
    watching,
)
from palimpsest.hn.index.files import check_private_file, index_dir, load_key, temp_file
from palimpsest.hn.index.schema import INDEX_NAME, IndexState, Progress, StaleIndex, heads_digest
from palimpsest.hn.index.write import (
    RowWriter,
    affected_by,
    arrived,
    refresh_anchor,
    reproject,
    store_entries,
    store_envelopes,
    write_meta,
)

_SQLITE_SIDE_FILES = ("-wal", "-shm")


def missing_object(exc: Exception) -> Unavailable:
    """The error for a Git object that is not available locally."""
    return Unavailable(
        f"a Git object needed to read memory is not available locally ({exc})",
        code="object-unavailable",
        hint="in a partial clone fetch the memory refs and their objects explicitly; "
        "pal never fetches lazily (reads go through libgit2, which has no promisor support)",
    )


def open_index(
    repo: pygit2.Repository, *, rebuild: bool = False, progress: Progress | None = None
) -> MemoryIndex:
    """Open the index, bringing it up to date with the refs first.

    Missing, damaged or foreign-format indexes are rebuilt from Git (``progress`` hears about
    a long rebuild); moved stream heads are applied incrementally.  Reads never fetch: in a
    partial clone a missing object is an error, whatever ``GIT_NO_LAZY_FETCH`` says.

    Raises:
        Unavailable: ``index-unsafe`` when a path is a symlink or not ours;
            ``object-unavailable`` when a needed Git object is missing locally.
        InvalidInput: a memory stream is invalid (fail closed).
    """
    try:
        return _open_index(repo, rebuild=rebuild, progress=progress)
    except (KeyError, pygit2.GitError) as exc:
        raise missing_object(exc) from exc
    except sqlite3.Error as exc:
        raise index_error(exc) from exc


@contextlib.contextmanager
def guarded() -> Iterator[None]:
    """Turn SQLite and Git failures while querying an open index into one-line errors."""
    try:
        yield
    except sqlite3.Error as exc:
        raise index_error(exc) from exc
    except (KeyError, pygit2.GitError) as exc:
        raise missing_object(exc) from exc


def _open_index(
    repo: pygit2.Repository, *, rebuild: bool, progress: Progress | None
) -> MemoryIndex:
    directory = index_dir(repo.path)
    path = directory / INDEX_NAME
    key = load_key(directory)
    refs = store.list_memory_refs(repo)
    if not rebuild and check_private_file(path):
        conn = cached_connection(path, key)
        if conn is None:
            try:
                conn = open_existing(path)
            except StaleIndex:
                conn = None
        if conn is not None:
            try:
                state = _refresh(repo, conn, key, refs)
            except StaleIndex:
                forget(path)
                conn.close()
            else:
                return remember(path, MemoryIndex(conn, key, state))
    forget(path)
    return remember(path, _rebuild(repo, directory, key, refs, progress))


def build_file(
    repo: pygit2.Repository,
    directory: Path,
    key: bytes,
    refs: Sequence[store.MemoryRef],
    progress: Progress | None = None,
    *,
    wal: bool = True,
) -> tuple[str, int]:
    """Build a complete index into a new private temporary file; return its path and rows.

    ``wal``: record WAL mode in the file (for a file that replaces the index).  The file is
    removed again if anything fails.
    """
    fd, tmp = temp_file(directory)
    os.close(fd)
    conn: sqlite3.Connection | None = None
    try:
        conn = connect(tmp, building=True)
        conn.execute("BEGIN")
        records = build(repo, conn, key, refs, progress=progress)
        conn.execute("COMMIT")
        if wal:
            conn.execute("PRAGMA journal_mode=WAL")  # recorded in the file header
        conn.close()
        conn = None
        fd = os.open(tmp, os.O_RDONLY | os.O_NOFOLLOW)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException:
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()
        Path(tmp).unlink(missing_ok=True)
        raise
    return tmp, records


def _rebuild(
    repo: pygit2.Repository,
    directory: Path,
    key: bytes,
    refs: Sequence[store.MemoryRef],
    progress: Progress | None,
) -> MemoryIndex:
    tmp, records = build_file(repo, directory, key, refs, progress)
    try:
        for suffix in (*_SQLITE_SIDE_FILES, "-journal"):
            # Planted or stale side files must never be applied to the new index.
            with contextlib.suppress(FileNotFoundError):
                os.unlink(str(directory / INDEX_NAME) + suffix)
        os.replace(tmp, directory / INDEX_NAME)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    final = connect(directory / INDEX_NAME)
    state = IndexState(tuple((r.name, r.head) for r in refs), records)
    return MemoryIndex(final, key, state)


def _refresh(
    repo: pygit2.Repository,
    conn: sqlite3.Connection,
    key: bytes,
    refs: Sequence[store.MemoryRef],
) -> IndexState:
    meta = meta_of(conn)
    pairs = tuple((r.name, r.head) for r in refs)
    records = int(meta.get("records", "0"))
    probe = store.RepoProbe(repo)
    changed: list[tuple[store.MemoryRef, tuple[VerifiedMemory, ...]]] = []
    if meta.get("heads") != heads_digest(pairs):
        changed = _moved_streams(repo, conn, refs)
    found, late = arrived(conn, probe) if watching(conn) else ([], set())
    if not changed and not late and not found:
        return IndexState(pairs, records)
    conn.execute("BEGIN IMMEDIATE")
    try:
        for aid, anchor_state in found:
            refresh_anchor(conn, key, aid, anchor_state)
        if found:  # kept reach sets said nothing reaches a missing commit
            conn.execute("DELETE FROM reach")
        writer = RowWriter(conn, key, probe, fresh=False)
        new_ids: list[str] = []
        for ref, suffix in changed:
            store_entries(conn, ref, suffix, replace_all=False)
            new_ids += store_envelopes(conn, suffix)
        affected = set(late)
        if new_ids:
            affected |= affected_by(conn, new_ids)
        reproject(conn, writer, probe, affected)
        writer.finish()
        records += writer.added
        state = write_meta(conn, refs, records)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return state


def _moved_streams(
    repo: pygit2.Repository, conn: sqlite3.Connection, refs: Sequence[store.MemoryRef]
) -> list[tuple[store.MemoryRef, tuple[VerifiedMemory, ...]]]:
    stored = {
        str(r): (str(h), int(c), str(last))
        for r, h, c, last in conn.execute("SELECT ref, head, count, last_id FROM sources")
    }
    names = {r.name for r in refs}
    if set(stored) - names:
        raise StaleIndex("stale: a source ref disappeared")
    changed: list[tuple[store.MemoryRef, tuple[VerifiedMemory, ...]]] = []
    for ref in refs:
        old = stored.get(ref.name)
        if old is not None and old[0] == ref.head:
            continue
        if old is None:
            suffix = store.load_stream(repo, ref)
        else:
            loaded = store.load_stream_since(repo, ref, old[0], old[1], old[2])
            if loaded is None:
                raise StaleIndex("stale: a stream was rewritten")
            suffix = loaded
        changed.append((ref, suffix))
    return changed


__all__ = ["build_file", "guarded", "missing_object", "open_index"]
