"""The private recall index below ``<git-dir>/hn/memory/``, open: connections, the cache of
open connections, and the small lookups of a query context.  No Git here (see
:mod:`palimpsest.hn.index.update` for bringing the index up to date with the refs).

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
rebuilding: another commit, subject, path or policy reads the same file.  What a query commit
reaches and the policy there are kept per commit (``reach``), so a recall at a commit asked
before needs no Git at all (:func:`open_current`).

File safety (security-tests.md D17): the directories are owner-only (0700) and owned by us, the
file is a 0600 regular file with one link, owned by us; symlinks are refused; a rebuild writes a
temporary file and renames it over the old one; SQLite runs with ``trusted_schema=OFF`` and the
schema must be exactly ours (no extra tables, views or triggers).  Rows, totals, anchors and
kept reach sets carry a MAC under a per-repository key kept in a separate 0600 file, so a row
no verified memory backs (or a file planted from elsewhere) is detected when read;
``pal memory index verify`` re-derives the whole index and compares it (:mod:`.verify`).

Layout: this module (open files, lookups), :mod:`.update` (refresh and rebuild from Git),
:mod:`.schema` (schema and row format), :mod:`.files` (file checks), :mod:`.write` (writes and
re-projection), :mod:`.build` (the streaming full build), :mod:`.reach` (what a commit
reaches), :mod:`.verify` (re-derive and compare) and :mod:`.query` (the recall and grep SQL).
"""

from __future__ import annotations

import contextlib
import hmac
import os
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from palimpsest.errors import Unavailable
from palimpsest.hn.index.files import check_private_file, index_dir, load_key, side_file_ok
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

TYPE_CHECKING = False  # typing stays unimported at run time (the warm recall's start-up)
if TYPE_CHECKING:
    from typing import Any

    from palimpsest.hn.envelope import VerifiedMemory

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

    def __init__(self, conn: sqlite3.Connection, key: bytes, state: IndexState) -> None:
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
        # The envelope model and signature code load only when envelopes are read.
        from palimpsest.hn.index.write import load_memories  # noqa: PLC0415

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

    def actor_slots(self) -> list[tuple[int, str]]:
        """Every ``(slot, actor)`` of the actor table (a row class is a slot and a kind)."""
        return [(int(slot), str(actor))
                for slot, actor in self.conn.execute("SELECT slot, actor FROM actors")]  # fmt: skip

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

    def kept_policy(self, commit: str) -> tuple[str, bool, bytes] | None:
        """The kept policy of a query commit: ``(.hn tree ID, present, blob)``, or None.

        Raises:
            IndexTampered: the kept row failed its check.
        """
        return self._policy("commit_id", commit)

    def policy_of_tree(self, tree_id: str) -> tuple[str, bool, bytes] | None:
        """A kept policy read from the ``.hn`` tree ``tree_id`` (any commit), or None.

        Raises:
            IndexTampered: the kept row failed its check.
        """
        return self._policy("tree_id", tree_id) if tree_id else None

    def _policy(self, column: str, value: str) -> tuple[str, bool, bytes] | None:
        row = self.conn.execute(
            "SELECT commit_id, tree_id, present, blob, stamp, mac FROM policies"  # noqa: S608
            f" WHERE {column} = ? LIMIT 1",
            (value,),
        ).fetchone()
        if row is None:
            return None
        commit, tree_id, present, blob, stamp, mac = row
        if not self.valid((commit, tree_id, present, bytes(blob), stamp), str(mac)):
            raise IndexTampered("policies")
        return str(tree_id), bool(present), bytes(blob)

    def keep_policy(self, commit: str, tree_id: str, blob: bytes | None) -> None:
        """Keep the policy blob of a query commit (None: it has none) and the ``.hn`` tree it
        came from; the :data:`REACH_KEPT` most recent are kept."""
        with self.writing():
            top = self.conn.execute("SELECT coalesce(max(stamp), 0) FROM policies").fetchone()
            stamp = int(top[0]) + 1
            values = (commit, tree_id, int(blob is not None), blob or b"", stamp)
            self.conn.execute(
                "INSERT OR REPLACE INTO policies VALUES (?, ?, ?, ?, ?, ?)",
                (*values, mac_of(self.key, values)),
            )
            self.conn.execute("DELETE FROM policies WHERE stamp <= ?", (stamp - REACH_KEPT,))

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


def meta_of(conn: sqlite3.Connection) -> dict[str, str]:
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
        meta = meta_of(conn)
        if meta.get("format") != FORMAT:
            raise StaleIndex("incompatible")
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise StaleIndex("corrupt") from exc
    except StaleIndex:
        conn.close()
        raise
    return conn


def index_error(exc: Exception) -> Unavailable:
    """The error for an index SQLite cannot read or write."""
    return Unavailable(
        f"memory index unavailable: {exc}",
        code="index-unavailable",
        hint="retry; if it persists delete .git/hn/memory (a disposable cache)",
    )


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


def remember(path: Path, index: MemoryIndex) -> MemoryIndex:
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


def cached_connection(path: Path, key: bytes) -> sqlite3.Connection | None:
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


def open_current(git_dir: str | Path, heads: Sequence[tuple[str, str]]) -> MemoryIndex | None:
    """The index of ``git_dir`` when it is already up to date with these source heads and no
    row waits for a missing object — so it can answer without any Git read; None otherwise
    (the caller brings it up to date through :func:`palimpsest.hn.index.update.open_index`).

    Raises:
        Unavailable: ``index-unsafe`` when a path is a symlink or not ours.
    """
    directory = index_dir(git_dir)
    path = directory / INDEX_NAME
    if not check_private_file(path):
        return None
    key = load_key(directory)
    conn = cached_connection(path, key)
    if conn is None:
        try:
            conn = open_existing(path)
        except StaleIndex:
            return None
    found = meta_of(conn)
    if found.get("heads") != heads_digest(heads) or watching(conn):
        if _OPEN.get(str(path), (None, None, None))[2] is None:
            conn.close()  # not cached: ours to close
        return None
    state = IndexState(tuple(heads), int(found.get("records", "0")))
    return remember(path, MemoryIndex(conn, key, state))


def watching(conn: sqlite3.Connection) -> bool:
    """Whether any row was judged with a missing object (so the objects must be probed)."""
    row = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM anchors WHERE state = 'missing')"
        " OR EXISTS (SELECT 1 FROM missing_objects)"
    ).fetchone()
    return bool(row[0])


__all__ = [
    "BUSY_TIMEOUT",
    "REACH_KEPT",
    "Anchor",
    "MemoryIndex",
    "cached_connection",
    "connect",
    "forget",
    "index_error",
    "meta_of",
    "open_current",
    "open_existing",
    "remember",
    "watching",
]
