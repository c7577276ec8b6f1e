"""The private, disposable, incremental recall index below ``<git-dir>/hn/memory/``.

The index is a SQLite file of our own format (hn-memory-v0.md §19 describes upstream's JSON
file; only the source fingerprint of §19.2 is shared).  It is derived only from verified memory
refs, never transported, and safe to delete.

Verified once per stream head, free of query context (ARCHITECTURE.md §4): it holds, for every
source ref, the head it was read at; every verified envelope (so a few memories can be projected
again without touching Git); and one row per record/supersede memory with what does not depend
on the query — lifecycle and edges, whether the anchor commit and path anchors check out,
evidence, anchor and applicability mode, and the recall JSON around its trust value — beside
narrow integer row keys and the topic, term, path, anchor and subject postings that recalls
read.  Which rows apply at a query commit, under a subject or a path, and their trust under the
policy there, are judged when a recall asks (:mod:`palimpsest.hn.recall.context`), never by
rebuilding: another commit, subject, path or policy reads the same file.

Incremental rule: when a stream head moves forward, only the new commits of that stream are
read and verified (:func:`palimpsest.hn.store.load_stream_since`); the rows whose answers can
change — the new rows, the targets of new relationships, rows whose relationships or memory
evidence name a new memory — are re-projected over exactly the memories those answers depend
on; so are rows judged with an anchor commit or ``git:`` evidence object that was missing and is
present now (probed on every open).  Anything else (a ref rewritten or deleted, a damaged or
foreign file, another format) rebuilds the whole index from Git, streaming
(:mod:`palimpsest.hn.index.build`).  A property test checks the incremental answers against a
from-scratch projection.

File safety (security-tests.md D17): the directories are owner-only (0700) and owned by us, the
file is a 0600 regular file with one link, owned by us; symlinks are refused; a rebuild writes a
temporary file and renames it over the old one; SQLite runs with ``trusted_schema=OFF`` and the
schema must be exactly ours (no extra tables, views or triggers).  Rows, totals, anchors and
cached reach sets carry a MAC under a per-repository key kept in a separate 0600 file, so a row
no verified memory backs (or a file planted from elsewhere) is detected when read;
``pal memory index verify`` re-derives the whole index and compares it (:mod:`.verify`).

Layout: this module opens, caches, rebuilds and refreshes the index and answers the small
lookups a query context needs; the schema and row format live in :mod:`.schema`, the file
checks in :mod:`.files`, the writes and re-projection in :mod:`.write`, the full build in
:mod:`.build`, verify in :mod:`.verify` and the recall and grep SQL in :mod:`.query`.
"""

from __future__ import annotations

import contextlib
import hmac
import os
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pygit2

from palimpsest.errors import Unavailable
from palimpsest.hn import store
from palimpsest.hn.envelope import VerifiedMemory
from palimpsest.hn.index.build import Progress, build
from palimpsest.hn.index.files import (
    check_private_file,
    index_dir,
    load_key,
    side_file_ok,
    temp_file,
)
from palimpsest.hn.index.schema import (
    FORMAT,
    INDEX_NAME,
    IndexState,
    IndexTampered,
    StaleIndex,
    expected_schema,
    heads_digest,
    mac_of,
    schema_of,
)
from palimpsest.hn.index.write import (
    RowWriter,
    affected_by,
    arrived,
    load_memories,
    refresh_anchor,
    reproject,
    store_entries,
    store_envelopes,
    write_meta,
)

_SQLITE_SIDE_FILES = ("-wal", "-shm")
BUSY_TIMEOUT = 5.0  # seconds another process may hold the index's write lock
MMAP_BYTES = 2_147_418_112  # SQLite's default compile-time ceiling for mmap_size
REACH_KEPT = 32  # query commits whose reach sets are kept


def connect(path: Path | str, *, building: bool = False) -> sqlite3.Connection:
    """A connection to an index file (a new one being built: no journal, no syncs)."""
    conn = sqlite3.connect(
        str(path), isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT
    )
    conn.execute("PRAGMA trusted_schema=OFF")
    conn.execute("PRAGMA foreign_keys=OFF")
    if building:
        # A private temporary file that is deleted on any failure: no journal needed.
        conn.execute("PRAGMA journal_mode=OFF")
        conn.execute("PRAGMA synchronous=OFF")
    else:
        # WAL: commits are atomic and stay consistent after a crash or power loss (checksummed
        # frames) without an fsync per update; losing the last update only means re-reading it.
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        # Read pages through a memory map: a filtered recall probes a few thousand random pages
        # of a file far larger than SQLite's 2 MB page cache, and a pread per page made warm
        # queries 5-10x slower.  The file is private and replaced by rename, never truncated
        # in place, so the mapping cannot be cut short under a reader by anything but us.
        conn.execute(f"PRAGMA mmap_size={MMAP_BYTES}")
    return conn


# ------------------------------------------------------------------------- the index


class MemoryIndex:
    """An open, verified-current index for one repository (any query context)."""

    def __init__(
        self, repo: pygit2.Repository, conn: sqlite3.Connection, key: bytes, state: IndexState
    ) -> None:
        self.repo = repo
        self.conn = conn
        self.key = key
        self.state = state

    def close(self) -> None:
        """Release the index; the connection stays cached for the next call in this process
        and is re-checked then (file identity, SQLite ``data_version``, sources)."""

    def __enter__(self) -> MemoryIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def memories(self, ids: Iterable[str]) -> list[VerifiedMemory]:
        """The stored envelopes of ``ids``, hash and signature verified again (unknown IDs are
        skipped).

        Raises:
            StaleIndex: a stored envelope no longer verifies.
        """
        return load_memories(self.conn, ids)

    # -------------------------------------------------------------- integrity

    def valid(self, values: Sequence[Any], mac: str) -> bool:
        """Check a stored MAC over the other columns of a row."""
        return hmac.compare_digest(mac_of(self.key, values), mac)

    # -------------------------------------------------------------- query-context lookups

    def anchors(self, aids: Iterable[int] | None = None, *, after: int = 0) -> list[Anchor]:
        """Anchors by ID (all with an ID above ``after`` when ``aids`` is None), MAC-checked.

        Raises:
            IndexTampered: an anchor row failed its check.
        """
        if aids is None:
            found = self.conn.execute(
                "SELECT aid, commit_id, state, n_desc, n_exact, mac FROM anchors WHERE aid > ?",
                (after,),
            ).fetchall()
        else:
            wanted = sorted(set(aids))
            found = []
            for start in range(0, len(wanted), 500):
                chunk = wanted[start : start + 500]
                found += self.conn.execute(
                    "SELECT aid, commit_id, state, n_desc, n_exact, mac FROM anchors"  # noqa: S608
                    f" WHERE aid IN ({','.join('?' * len(chunk))})",
                    chunk,
                ).fetchall()
        return [self._anchor(row) for row in found]

    def anchors_at(self, commits: Iterable[str]) -> dict[str, Anchor]:
        """The anchors of ``commits`` that rows are anchored at, by commit (MAC-checked).

        Raises:
            IndexTampered: an anchor row failed its check.
        """
        wanted = sorted(set(commits))
        out: dict[str, Anchor] = {}
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            for row in self.conn.execute(
                "SELECT aid, commit_id, state, n_desc, n_exact, mac FROM anchors"  # noqa: S608
                f" WHERE commit_id IN ({','.join('?' * len(chunk))})",
                chunk,
            ):
                anchor = self._anchor(row)
                out[anchor.commit] = anchor
        return out

    def anchor_at(self, commit: str) -> Anchor | None:
        """The anchor of ``commit``, if any row is anchored there (MAC-checked)."""
        row = self.conn.execute(
            "SELECT aid, commit_id, state, n_desc, n_exact, mac FROM anchors WHERE commit_id = ?",
            (commit,),
        ).fetchone()
        return None if row is None else self._anchor(row)

    def _anchor(self, row: Sequence[Any]) -> Anchor:
        aid, commit, state, n_desc, n_exact, mac = row
        if not self.valid((aid, commit, state, n_desc, n_exact), str(mac)):
            raise IndexTampered("anchors")
        return Anchor(int(aid), str(commit), str(state), int(n_desc), int(n_exact))

    def last_anchor(self) -> int:
        """The largest anchor ID (anchor IDs are 1..n)."""
        return int(self.conn.execute("SELECT coalesce(max(aid), 0) FROM anchors").fetchone()[0])

    def descendant_anchors(self) -> int:
        """A bitmap (bit ``aid``) of the anchors holding eligible descendants-mode rows.

        Raises:
            IndexTampered: an anchor row failed its check.
        """
        bits = 0
        for anchor in self.anchors():
            if anchor.n_desc:
                bits |= 1 << anchor.aid
        return bits

    def reach(self, commit: str) -> tuple[int, int] | None:
        """The cached reach set of a query commit: ``(upto, bitmap)`` — bit ``aid`` set when
        anchor ``aid`` (≤ ``upto``) is the commit or one of its ancestors — or None.

        Raises:
            IndexTampered: the cached row failed its check.
        """
        row = self.conn.execute(
            "SELECT upto, bits, stamp, mac FROM reach WHERE commit_id = ?", (commit,)
        ).fetchone()
        if row is None:
            return None
        upto, bits, stamp, mac = row
        if not self.valid((commit, upto, bytes(bits), stamp), str(mac)):
            raise IndexTampered("reach")
        return int(upto), int.from_bytes(bytes(bits), "little")

    def reach_commits(self) -> list[str]:
        """The query commits whose reach sets are kept."""
        return [str(c) for (c,) in self.conn.execute("SELECT commit_id FROM reach")]

    def remember_reach(self, commit: str, upto: int, bits: int) -> None:
        """Keep a query commit's reach set (the :data:`REACH_KEPT` most recent are kept)."""
        raw = bits.to_bytes((bits.bit_length() + 7) // 8, "little")
        with self.writing():
            top = self.conn.execute("SELECT coalesce(max(stamp), 0) FROM reach").fetchone()
            stamp = int(top[0]) + 1
            values = (commit, upto, raw, stamp)
            self.conn.execute(
                "INSERT OR REPLACE INTO reach VALUES (?, ?, ?, ?, ?)",
                (*values, mac_of(self.key, values)),
            )
            self.conn.execute(
                "DELETE FROM reach WHERE stamp <= ?", (stamp - REACH_KEPT,)
            )

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """One write transaction (rolled back on any failure)."""
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")
        _note_own_write(self)


class Anchor:
    """An anchor commit of the index: ID, commit, object state and eligible-row counts."""

    __slots__ = ("aid", "commit", "n_desc", "n_exact", "state")

    def __init__(self, aid: int, commit: str, state: str, n_desc: int, n_exact: int) -> None:
        self.aid = aid
        self.commit = commit
        self.state = state
        self.n_desc = n_desc
        self.n_exact = n_exact


def _meta(conn: sqlite3.Connection) -> dict[str, str]:
    return {str(k): str(v) for k, v in conn.execute("SELECT key, value FROM meta")}


def open_existing(path: Path) -> sqlite3.Connection:
    """Open a stored index file if it is safe, ours and of this format.

    Raises:
        StaleIndex: it cannot be used as it is (the reason says why).
    """
    for suffix in _SQLITE_SIDE_FILES:
        if not side_file_ok(Path(str(path) + suffix)):
            raise StaleIndex(f"unsafe {suffix} file beside the index")
    try:
        conn = connect(path)
    except sqlite3.DatabaseError as exc:
        raise StaleIndex("corrupt") from exc
    try:
        if schema_of(conn) != expected_schema():
            raise StaleIndex("corrupt: unexpected schema")
        meta = _meta(conn)
        if meta.get("format") != FORMAT:
            raise StaleIndex("incompatible")
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise StaleIndex("corrupt") from exc
    except StaleIndex:
        conn.close()
        raise
    return conn


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


def index_error(exc: Exception) -> Unavailable:
    """The error for an index SQLite cannot read or write."""
    return Unavailable(
        f"memory index unavailable: {exc}",
        code="index-unavailable",
        hint="retry; if it persists delete .git/hn/memory (a disposable cache)",
    )


@contextlib.contextmanager
def guarded() -> Iterator[None]:
    """Turn SQLite and Git failures while querying an open index into one-line errors."""
    try:
        yield
    except sqlite3.Error as exc:
        raise index_error(exc) from exc
    except (KeyError, pygit2.GitError) as exc:
        raise missing_object(exc) from exc


# Open connections by index path: (file identity, SQLite data_version, index).  A cached
# connection is reused only while the file is the same inode, unchanged in size and times, and
# no other connection has committed to it; otherwise every check runs again.
_OPEN: dict[str, tuple[tuple[int, ...], int, MemoryIndex]] = {}


def _file_identity(path: Path) -> tuple[int, ...]:
    info = os.lstat(path)
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns,
            info.st_mode, info.st_uid, info.st_nlink)  # fmt: skip


def _data_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA data_version").fetchone()[0])


def _remember(path: Path, index: MemoryIndex) -> MemoryIndex:
    old = _OPEN.get(str(path))
    if old is not None and old[2].conn is not index.conn:
        old[2].conn.close()
    _OPEN[str(path)] = (_file_identity(path), _data_version(index.conn), index)
    return index


def _note_own_write(index: MemoryIndex) -> None:
    """After our own commit the file's times changed: keep the cache entry valid for us."""
    for path, (_identity, _version, cached) in list(_OPEN.items()):
        if cached is index:
            with contextlib.suppress(OSError):
                _OPEN[path] = (_file_identity(Path(path)), _data_version(index.conn), index)


def forget(path: Path) -> None:
    """Drop (and close) the cached connection of an index file."""
    old = _OPEN.pop(str(path), None)
    if old is not None:
        old[2].conn.close()


def _cached(path: Path, key: bytes) -> sqlite3.Connection | None:
    entry = _OPEN.get(str(path))
    if entry is None:
        return None
    identity, version, index = entry
    try:
        same = identity == _file_identity(path) and index.key == key
        same = same and version == _data_version(index.conn)
    except (OSError, sqlite3.Error):
        same = False
    if not same:
        forget(path)
        return None
    return index.conn


def _open_index(
    repo: pygit2.Repository, *, rebuild: bool, progress: Progress | None
) -> MemoryIndex:
    directory = index_dir(repo)
    path = directory / INDEX_NAME
    key = load_key(directory)
    refs = store.list_memory_refs(repo)
    if not rebuild and check_private_file(path):
        conn = _cached(path, key)
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
                return _remember(path, MemoryIndex(repo, conn, key, state))
    forget(path)
    return _remember(path, _rebuild(repo, directory, key, refs, progress))


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
    return MemoryIndex(repo, final, key, state)


def _refresh(
    repo: pygit2.Repository,
    conn: sqlite3.Connection,
    key: bytes,
    refs: Sequence[store.MemoryRef],
) -> IndexState:
    meta = _meta(conn)
    pairs = tuple((r.name, r.head) for r in refs)
    records = int(meta.get("records", "0"))
    probe = store.RepoProbe(repo)
    changed: list[tuple[store.MemoryRef, tuple[VerifiedMemory, ...]]] = []
    if meta.get("heads") != heads_digest(pairs):
        changed = _moved_streams(repo, conn, refs)
    found, late = arrived(conn, probe) if _watching(conn) else ([], set())
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


def _watching(conn: sqlite3.Connection) -> bool:
    """Whether any row was judged with a missing object (so the objects must be probed)."""
    row = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM anchors WHERE state = 'missing')"
        " OR EXISTS (SELECT 1 FROM missing_objects)"
    ).fetchone()
    return bool(row[0])


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


__all__ = [
    "BUSY_TIMEOUT",
    "REACH_KEPT",
    "Anchor",
    "MemoryIndex",
    "build_file",
    "connect",
    "forget",
    "guarded",
    "index_error",
    "missing_object",
    "open_existing",
    "open_index",
]
