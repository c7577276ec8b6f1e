"""The private, disposable, incremental recall index below ``<git-dir>/hn/memory/``.

The index is a SQLite file of our own format (hn-memory-v0.md §19 describes upstream's JSON
file; only the source fingerprint of §19.2 is shared).  It is derived only from verified memory
refs plus the policy at the query commit, never transported, and safe to delete.

What it holds: for every source ref the head it was built from; every verified envelope
(payload bytes and signature, so an update can re-project a few memories without touching Git);
and one row per record/supersede memory with the projection at the index's context (query
commit, subject, path) rendered as the exact recall JSON of that record, plus the columns recall
filters and orders on; beside each row a narrow key row (integer IDs, the same filter and order
columns) and its topic, term and path postings in a contentless FTS5 table, which filtered
recalls read instead of the wide rows.  Format changes bump ``FORMAT``; an index of any other
format or schema is rebuilt.

Incremental rule: when a stream head moves forward, only the new commits of that stream are
read and verified (:func:`palimpsest.hn.store.load_stream_since`); the rows whose answers can
change — the new rows, the targets of new relationships, rows whose relationships or memory
evidence name a new memory — are re-projected with :func:`palimpsest.hn.projection.project`
over exactly the memories those answers depend on.  Anything else (a ref rewritten or deleted,
another query context, another policy, a damaged or foreign file) rebuilds the whole index from
Git.  A property test checks the incremental answers against a from-scratch projection.

File safety (security-tests.md D17): the directories are owner-only (0700) and owned by us, the
file is a 0600 regular file with one link, owned by us; symlinks are refused; a rebuild writes a
temporary file and renames it over the old one; SQLite runs with ``trusted_schema=OFF`` and the
schema must be exactly ours (no extra tables, views or triggers).  Every row carries an HMAC
under a per-repository key kept in a separate 0600 file, so a row no verified memory backs (or a
file planted from elsewhere) is detected when read; ``pal memory index verify`` re-derives the
whole index and compares every row.

Layout: this module opens, caches, rebuilds and refreshes the index; its schema and row format
live in :mod:`palimpsest.hn.index.schema`, the directory and file checks in
:mod:`palimpsest.hn.index.files`, the writes and incremental re-projection in
:mod:`palimpsest.hn.index.write`, and the queries in :mod:`palimpsest.hn.index.query`.
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

from palimpsest.errors import Conflict, NotFound, Unavailable
from palimpsest.hn import store
from palimpsest.hn.envelope import VerifiedMemory
from palimpsest.hn.index.files import (
    check_private_file,
    index_dir,
    load_key,
    side_file_ok,
    temp_file,
)
from palimpsest.hn.index.schema import (
    CLASS_OF,
    FORMAT,
    GROUP_SQL,
    INDEX_NAME,
    KEY_NAME,
    LIFECYCLE_RANK,
    ROW_COLUMNS,
    SCHEMA,
    IndexContext,
    IndexState,
    IndexTampered,
    StaleIndex,
    expected_schema,
    index_tokens,
    key_values,
    posting_terms,
    recall_record,
    row_mac,
    row_values,
    schema_of,
    search_fields,
    source_fingerprint,
)
from palimpsest.hn.index.write import (
    load_memories,
    project_in,
    reproject,
    store_entries,
    store_envelopes,
    write_meta,
    write_rows,
)
from palimpsest.hn.policy import PolicyContext, policy_context
from palimpsest.hn.projection import Row

_SQLITE_SIDE_FILES = ("-wal", "-shm")
BUSY_TIMEOUT = 5.0  # seconds another process may hold the index's write lock
MMAP_BYTES = 2_147_418_112  # SQLite's default compile-time ceiling for mmap_size


def _connect(path: Path | str, *, building: bool = False) -> sqlite3.Connection:
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
    """An open, verified-current index for one repository and context."""

    def __init__(
        self,
        repo: pygit2.Repository,
        conn: sqlite3.Connection,
        key: bytes,
        state: IndexState,
        policy: PolicyContext,
    ) -> None:
        self.repo = repo
        self.conn = conn
        self.key = key
        self.state = state
        self.policy = policy

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

    # -------------------------------------------------------------- row integrity

    def row_valid(self, values: Sequence[Any], mac: str) -> bool:
        """Check the per-row HMAC over every other column of the row (:data:`ROW_COLUMNS`)."""
        return hmac.compare_digest(row_mac(self.key, values), mac)


def _meta(conn: sqlite3.Connection) -> dict[str, str]:
    return {str(k): str(v) for k, v in conn.execute("SELECT key, value FROM meta")}


def _open_existing(path: Path) -> sqlite3.Connection:
    for suffix in _SQLITE_SIDE_FILES:
        if not side_file_ok(Path(str(path) + suffix)):
            raise StaleIndex(f"unsafe {suffix} file beside the index")
    try:
        conn = _connect(path)
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


_POLICIES: dict[tuple[str, str], PolicyContext] = {}


def _policy_at(repo: pygit2.Repository, commit: str) -> PolicyContext:
    # A commit names its tree and so its policy blob exactly: safe to remember per commit.
    cache_key = (str(repo.path), commit)
    cached = _POLICIES.get(cache_key)
    if cached is None:
        if len(_POLICIES) > 64:
            _POLICIES.clear()
        cached = _POLICIES[cache_key] = policy_context(commit, store.policy_blob(repo, commit))
    return cached


def _missing_object(exc: Exception) -> Unavailable:
    return Unavailable(
        f"a Git object needed to read memory is not available locally ({exc})",
        code="object-unavailable",
        hint="in a partial clone fetch the memory refs and their objects explicitly; "
        "pal never fetches lazily (reads go through libgit2, which has no promisor support)",
    )


def open_index(
    repo: pygit2.Repository, context: IndexContext, *, rebuild: bool = False
) -> MemoryIndex:
    """Open the index for ``context``, bringing it up to date with the refs first.

    Missing, damaged, foreign-format or other-context indexes are rebuilt from Git; moved stream
    heads are applied incrementally.  Reads never fetch: in a partial clone a missing object is
    an error, whatever ``GIT_NO_LAZY_FETCH`` says.

    Raises:
        Unavailable: ``index-unsafe`` when a path is a symlink or not ours;
            ``object-unavailable`` when a needed Git object is missing locally.
        InvalidInput: a memory stream or the policy is invalid (fail closed).
    """
    try:
        return _open_index(repo, context, rebuild=rebuild)
    except (KeyError, pygit2.GitError) as exc:
        raise _missing_object(exc) from exc
    except sqlite3.Error as exc:
        raise _index_error(exc) from exc


def _index_error(exc: Exception) -> Unavailable:
    return Unavailable(
        f"memory index unavailable: {exc}",
        code="index-unavailable",
        hint="retry; if it persists delete .git/hn/memory (a disposable cache)",
    )


@contextlib.contextmanager
def guarded() -> Iterator[None]:
    """Turn SQLite failures while querying an open index into a one-line ``Unavailable``."""
    try:
        yield
    except sqlite3.Error as exc:
        raise _index_error(exc) from exc


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


def _forget(path: Path) -> None:
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
        _forget(path)
        return None
    return index.conn


def _open_index(
    repo: pygit2.Repository, context: IndexContext, *, rebuild: bool = False
) -> MemoryIndex:
    directory = index_dir(repo)
    path = directory / INDEX_NAME
    key = load_key(directory)
    policy = _policy_at(repo, context.at_commit)
    refs = store.list_memory_refs(repo)
    if not rebuild and check_private_file(path):
        conn = _cached(path, key)
        if conn is None:
            try:
                conn = _open_existing(path)
            except StaleIndex:
                conn = None
        if conn is not None:
            try:
                state = _refresh(repo, conn, key, context, policy, refs)
            except StaleIndex:
                _forget(path)
                conn.close()
            else:
                return _remember(path, MemoryIndex(repo, conn, key, state, policy))
    _forget(path)
    return _remember(path, _rebuild(repo, directory, key, context, policy, refs))


def _rebuild(  # noqa: PLR0917 - internal, one call site
    repo: pygit2.Repository,
    directory: Path,
    key: bytes,
    context: IndexContext,
    policy: PolicyContext,
    refs: Sequence[store.MemoryRef],
) -> MemoryIndex:
    # load_streams: the same checks and first error as load_stream per ref, with the
    # Ed25519 arithmetic of a large rebuild spread over worker processes (hn/sigpool.py).
    streams = dict(zip((ref.name for ref in refs), store.load_streams(repo, refs), strict=True))
    memories = store.collect_from(streams.values())
    fd, tmp = temp_file(directory)
    os.close(fd)
    try:
        conn = _connect(tmp, building=True)
        conn.execute("BEGIN")
        for statement in SCHEMA:
            conn.execute(statement)
        for ref in refs:
            store_entries(conn, ref, streams[ref.name], replace_all=True)
        store_envelopes(conn, memories)
        projection = project_in(repo, context, policy, memories)
        records = write_rows(conn, key, projection.rows, fresh=True)
        state = write_meta(conn, context, policy, refs, records)
        conn.execute("COMMIT")
        conn.execute("PRAGMA journal_mode=WAL")  # recorded in the file header
        conn.close()
        fd = os.open(tmp, os.O_RDONLY | os.O_NOFOLLOW)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        for suffix in (*_SQLITE_SIDE_FILES, "-journal"):
            # Planted or stale side files must never be applied to the new index.
            with contextlib.suppress(FileNotFoundError):
                os.unlink(str(directory / INDEX_NAME) + suffix)
        os.replace(tmp, directory / INDEX_NAME)
    except BaseException:
        with contextlib.suppress(Exception):
            conn.close()
        Path(tmp).unlink(missing_ok=True)
        raise
    final = _connect(directory / INDEX_NAME)
    return MemoryIndex(repo, final, key, state, policy)


def _refresh(  # noqa: PLR0917 - internal, one call site
    repo: pygit2.Repository,
    conn: sqlite3.Connection,
    key: bytes,
    context: IndexContext,
    policy: PolicyContext,
    refs: Sequence[store.MemoryRef],
) -> IndexState:
    meta = _meta(conn)
    stored_context = IndexContext(
        meta.get("at_commit", ""), meta.get("subject", ""), meta.get("path", "")
    )
    if stored_context != context:
        raise StaleIndex("stale: another query context")
    if meta.get("policy_digest") != policy.digest:
        raise StaleIndex("stale: policy changed")
    fingerprint = source_fingerprint(policy.digest, ((r.name, r.head) for r in refs))
    if meta.get("source_fingerprint") == fingerprint:
        return IndexState(context, policy.digest, fingerprint, int(meta.get("records", "0")))
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
    records = int(meta.get("records", "0"))
    conn.execute("BEGIN")
    try:
        new_ids: list[str] = []
        for ref, suffix in changed:
            store_entries(conn, ref, suffix, replace_all=False)
            new_ids += store_envelopes(conn, suffix)
        if new_ids:
            records += reproject(repo, conn, key, context, policy, new_ids)
        state = write_meta(conn, context, policy, refs, records)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return state


def verify_index(repo: pygit2.Repository) -> IndexState:
    """Re-derive the index and compare it with the file (see :func:`_verify_index`)."""
    try:
        return _verify_index(repo)
    except (KeyError, pygit2.GitError) as exc:
        raise _missing_object(exc) from exc


def _verify_index(repo: pygit2.Repository) -> IndexState:
    """Re-derive the index (at the context it was built for) and compare it with the file.

    §19.4: a difference is ``stale``; a file that is not ours is ``corrupt``.

    Raises:
        NotFound: ``index-missing``.
        Conflict: ``index-stale`` / ``index-corrupt`` naming the cause.
    """
    directory = index_dir(repo)
    path = directory / INDEX_NAME
    if not check_private_file(path):
        raise NotFound(
            "memory index missing", code="index-missing", hint="run 'pal memory index rebuild'"
        )
    key = load_key(directory)
    try:
        conn = _open_existing(path)
    except StaleIndex as exc:
        raise Conflict(f"memory index {exc}", code="index-corrupt") from exc
    try:
        meta = _meta(conn)
        context = IndexContext(
            meta.get("at_commit", ""), meta.get("subject", ""), meta.get("path", "")
        )
        policy = _policy_at(repo, context.at_commit) if context.at_commit else None
        refs = store.list_memory_refs(repo)
        if policy is None:
            raise Conflict("memory index corrupt", code="index-corrupt")
        fingerprint = source_fingerprint(policy.digest, ((r.name, r.head) for r in refs))
        if (
            meta.get("source_fingerprint") != fingerprint
            or meta.get("policy_digest") != policy.digest
        ):
            raise Conflict("memory index stale: source or policy changed", code="index-stale")
        memories = store.collect(repo)
        projection = project_in(repo, context, policy, memories)
        columns = ", ".join(ROW_COLUMNS)
        stored = {
            str(values[0]): (tuple(values), str(mac))
            for *values, mac in conn.execute(f"SELECT {columns}, mac FROM rows")  # noqa: S608
        }
        expected = {}
        for row in projection.rows:
            values = row_values(row)
            expected[row.id] = (values, row_mac(key, values))
        if stored != expected or meta.get("records") != str(len(expected)):
            raise Conflict("memory index stale: derived projection changed", code="index-stale")
        stored_groups = sorted(tuple(g) for g in conn.execute("SELECT * FROM groups"))
        fresh_groups = sorted(
            (*values, row_mac(key, values))
            for values in conn.execute(GROUP_SQL + " GROUP BY 1, 2, 3, 4")
        )
        if stored_groups != fresh_groups:
            raise Conflict("memory index stale: derived projection changed", code="index-stale")
        if not _keys_match(conn, projection.rows, expected):
            raise Conflict("memory index stale: derived projection changed", code="index-stale")
        stored_ids = {str(r[0]) for r in conn.execute("SELECT id FROM envelopes")}
        if stored_ids != {m.memory_id for m in memories}:
            raise Conflict("memory index stale: derived projection changed", code="index-stale")
        return IndexState(context, policy.digest, fingerprint, len(expected))
    finally:
        conn.close()


def _keys_match(
    conn: sqlite3.Connection,
    rows: Sequence[Row],
    expected: dict[str, tuple[tuple[Any, ...], str]],
) -> bool:
    """Whether ``row_keys``, ``classes`` and the ``terms`` postings are exactly those of the
    re-derived rows."""
    classes = {
        int(c): (str(t), str(k), str(a))
        for c, t, k, a in conn.execute("SELECT cls, trust, kind, actor FROM classes")
    }
    doc_of: dict[str, int] = {}
    for doc, rid, mid, *rest in conn.execute("SELECT * FROM row_keys"):
        want = expected.get(str(mid))
        cls = int(rest[4])
        if want is None or classes.get(cls) != tuple(want[0][i] for i in CLASS_OF):
            return False
        if key_values(want[0], cls, int(rid)) != (doc, rid, mid, *rest):
            return False
        doc_of[str(mid)] = int(doc)
    if set(doc_of) != set(expected):
        return False
    wanted = {(word, doc_of[row.id]) for row in rows for word in posting_terms(row).split()}
    conn.execute("CREATE VIRTUAL TABLE temp.terms_vocab USING fts5vocab(main, terms, instance)")
    try:
        posted = {(str(w), int(d)) for w, d in conn.execute("SELECT term, doc FROM terms_vocab")}
    finally:
        conn.execute("DROP TABLE temp.terms_vocab")
    return posted == wanted


__all__ = [
    "FORMAT",
    "INDEX_NAME",
    "KEY_NAME",
    "LIFECYCLE_RANK",
    "ROW_COLUMNS",
    "IndexContext",
    "IndexState",
    "IndexTampered",
    "MemoryIndex",
    "StaleIndex",
    "guarded",
    "index_dir",
    "index_tokens",
    "open_index",
    "recall_record",
    "row_values",
    "search_fields",
    "source_fingerprint",
    "verify_index",
]
