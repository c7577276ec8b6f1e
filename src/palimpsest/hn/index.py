"""The private, disposable, incremental recall index below ``<git-dir>/hn/memory/``.

The index is a SQLite file of our own format (hn-memory-v0.md §19 describes upstream's JSON
file; only the source fingerprint of §19.2 is shared).  It is derived only from verified memory
refs plus the policy at the query commit, never transported, and safe to delete.

What it holds: for every source ref the head it was built from; every verified envelope
(payload bytes and signature, so an update can re-project a few memories without touching Git);
and one row per record/supersede memory with the projection at the index's context (query
commit, subject, path) rendered as the exact recall JSON of that record, plus the columns recall
filters and orders on.

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
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import re
import secrets
import sqlite3
import stat
import struct
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pygit2

from palimpsest.canonical import encode
from palimpsest.errors import Conflict, InvalidInput, NotFound, Unavailable
from palimpsest.hn import store
from palimpsest.hn.envelope import VerifiedMemory, decode_envelope, memory_id, verify_signature
from palimpsest.hn.policy import PolicyContext, policy_context
from palimpsest.hn.projection import Row, dependency_wire, project, row_parts
from palimpsest.text import word_tokens

FORMAT = "pal-hn-memory-index/6"
INDEX_NAME = "index-pal-v1.sqlite"
KEY_NAME = "index-pal-v1.key"
TEMP_PREFIX = ".hn-private-"
# §16.6: in recall output these empty lists are null.
RECALL_NIL = frozenset(
    ("challengers", "successors", "retractions", "evidenceDetails", "dependencies", "data.evidence")
)
LIFECYCLE_RANK = {
    "active": 0,
    "superseded": 1,
    "retracted": 2,
    "branching": 3,
    "dependency-missing": 4,
}
_SQLITE_SIDE_FILES = ("-wal", "-shm")
BUSY_TIMEOUT = 5.0  # seconds another process may hold the index's write lock

_SCHEMA = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) STRICT",
    "CREATE TABLE sources (ref TEXT PRIMARY KEY, head TEXT NOT NULL, count INTEGER NOT NULL,"
    " last_id TEXT NOT NULL) STRICT",
    "CREATE TABLE entries (ref TEXT NOT NULL, sequence INTEGER NOT NULL, id TEXT NOT NULL,"
    " commit_id TEXT NOT NULL, PRIMARY KEY (ref, sequence)) STRICT",
    "CREATE INDEX entries_id ON entries (id)",
    "CREATE TABLE envelopes (id TEXT PRIMARY KEY, commit_id TEXT NOT NULL, ref TEXT NOT NULL,"
    " operation TEXT NOT NULL, target TEXT NOT NULL, payload BLOB NOT NULL,"
    " signature TEXT NOT NULL) STRICT",
    "CREATE INDEX envelopes_target ON envelopes (target)",
    "CREATE TABLE rows (id TEXT PRIMARY KEY, actor TEXT NOT NULL, kind TEXT NOT NULL,"
    " lifecycle TEXT NOT NULL, lifecycle_rank INTEGER NOT NULL, trust TEXT NOT NULL,"
    " applicability TEXT NOT NULL, evidence TEXT NOT NULL, timestamp TEXT NOT NULL,"
    " anchor_subject TEXT NOT NULL, applies_subject TEXT NOT NULL,"
    " content_bytes INTEGER NOT NULL, data_bytes INTEGER NOT NULL,"
    " search_units INTEGER NOT NULL, json BLOB NOT NULL, deps BLOB NOT NULL,"
    " fields BLOB NOT NULL,"
    " mac TEXT NOT NULL) STRICT",
    # Walks eligible rows in recall order (§16.4) whatever the other filters are.
    "CREATE INDEX rows_walk ON rows (applicability, evidence, lifecycle_rank, timestamp DESC, id)",
    "CREATE INDEX rows_group ON rows (applicability, evidence, lifecycle_rank, trust, kind, actor,"
    " content_bytes, data_bytes, search_units)",
    # Lets counts driven by topic, term or path postings check each row without reading it.
    "CREATE INDEX rows_by_id ON rows (id, applicability, evidence, lifecycle_rank, trust, kind,"
    " actor, anchor_subject, applies_subject, timestamp, content_bytes, data_bytes,"
    " search_units)",
    # Per-class totals of eligible rows, so counts never scan the whole table.
    "CREATE TABLE groups (lifecycle_rank INTEGER NOT NULL, trust TEXT NOT NULL,"
    " kind TEXT NOT NULL, actor TEXT NOT NULL, n INTEGER NOT NULL, max_content INTEGER NOT NULL,"
    " max_data INTEGER NOT NULL, units INTEGER NOT NULL, mac TEXT NOT NULL,"
    " PRIMARY KEY (lifecycle_rank, trust, kind, actor)) STRICT, WITHOUT ROWID",
    "CREATE TABLE topics (id TEXT NOT NULL, topic TEXT NOT NULL, PRIMARY KEY (topic, id))"
    " WITHOUT ROWID",
    "CREATE INDEX topics_id ON topics (id)",
    "CREATE TABLE paths (id TEXT NOT NULL, path TEXT NOT NULL, PRIMARY KEY (path, id))"
    " WITHOUT ROWID",
    "CREATE INDEX paths_id ON paths (id)",
    "CREATE TABLE tokens (token TEXT NOT NULL, id TEXT NOT NULL, PRIMARY KEY (token, id))"
    " WITHOUT ROWID",
    "CREATE INDEX tokens_id ON tokens (id)",
    "CREATE TABLE evidence_refs (memory TEXT NOT NULL, id TEXT NOT NULL,"
    " PRIMARY KEY (memory, id)) WITHOUT ROWID",
)


# ------------------------------------------------------------------------- pure helpers


def source_fingerprint(policy_digest: str, refs: Iterable[tuple[str, str]]) -> str:
    """§19.2: SHA-256 over length-prefixed parts: tag, policy digest, sorted (ref, head)."""
    digest = hashlib.sha256()

    def part(text: str) -> None:
        data = text.encode("utf-8")
        digest.update(struct.pack(">Q", len(data)))
        digest.update(data)

    part("hn-memory-index-source-v0")
    part(policy_digest)
    for name, head in sorted(refs):
        part(name)
        part(head)
    return "sha256:" + digest.hexdigest()


@dataclass(frozen=True, slots=True)
class IndexContext:
    """The projection context an index is built for (§19.4)."""

    at_commit: str
    subject: str = ""
    path: str = ""


# A superset of Go's word runes (letters and numbers): Python's alphanumerics.  Every code point
# in Go's set is matched (checked exhaustively by a test), so runs found here contain every
# word; non-ASCII runs are re-split with the exact per-rune rules of palimpsest.text.
_ALNUM_RUNS = re.compile(r"[^\W_]+")


def index_tokens(text: str) -> list[str]:
    """Exactly :func:`palimpsest.text.lexical_tokens`, with a fast path for ASCII runs."""
    out: set[str] = set()
    for run in _ALNUM_RUNS.findall(text):
        if run.isascii():
            out.add(run.lower())
        else:
            out.update(word_tokens(run))
    return sorted(out)


def search_fields(data: dict[str, Any]) -> list[tuple[str, str]]:
    """The grep surface of one record's ``data``: content, each topic, each handoff string.

    Each item is ``(label, value)``; matching never crosses items (§23).
    """
    fields = [("content", str(data["content"]))]
    fields += [(f"topic[{i}]", str(t)) for i, t in enumerate(data.get("topics") or ())]
    handoff = data.get("handoff")
    if isinstance(handoff, dict):
        for key in ("completed", "assumptions", "blockers", "nextActions"):
            fields += [(f"handoff.{key}[{i}]", str(v)) for i, v in enumerate(handoff[key])]
    return fields


def recall_record(row: Row) -> dict[str, Any]:
    """The §19.3 index record of a row, with recall's null-for-empty lists (§16.6)."""
    parts = row_parts(row, nil_empty=RECALL_NIL, sort_data_evidence=True)
    data = parts["data"]
    if not data["topics"]:
        data["topics"] = None  # [inferred] §16.6: Go nil slice
    return parts


# ------------------------------------------------------------------------- file safety


def _unsafe(message: str) -> Unavailable:
    return Unavailable(
        message,
        code="index-unsafe",
        hint="remove the path (it is a disposable cache) and run 'pal memory index rebuild'",
    )


def _private_dir(path: Path) -> None:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        os.mkdir(path, 0o700)
        info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise _unsafe(f"{path} must be a real directory, not a symlink")
    if info.st_uid != os.geteuid():
        raise _unsafe(f"{path} is owned by another user")
    if stat.S_IMODE(info.st_mode) & 0o022:
        raise _unsafe(f"{path} is writable by other users")
    if stat.S_IMODE(info.st_mode) != 0o700:
        os.chmod(path, 0o700)


def index_dir(repo: pygit2.Repository) -> Path:
    """``<git-dir>/hn/memory``, created owner-only; symlinked or foreign paths are refused."""
    raw = Path(repo.path.rstrip("/"))
    if raw.is_symlink():
        raise _unsafe(f"{raw} is a symlink; refusing a symlinked git dir")
    base = raw / "hn"
    _private_dir(base)
    _private_dir(base / "memory")
    return base / "memory"


def _check_private_file(path: Path) -> bool:
    """True when ``path`` exists and is safe; False when absent.

    Raises:
        Unavailable: ``index-unsafe`` for symlinks, other owners, extra links or loose modes.
    """
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return False
    if not stat.S_ISREG(info.st_mode):
        raise _unsafe(f"{path} is not a regular file")
    if info.st_uid != os.geteuid():
        raise _unsafe(f"{path} is owned by another user")
    if info.st_nlink != 1:
        raise _unsafe(f"{path} has other hard links")
    if stat.S_IMODE(info.st_mode) != 0o600:
        raise _unsafe(f"{path} must have mode 0600")
    return True


def _load_key(directory: Path) -> bytes:
    path = directory / KEY_NAME
    if _check_private_file(path):
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as handle:
            key = handle.read(65)
        if len(key) == 32:
            return key
        path.unlink()
    key = secrets.token_bytes(32)
    fd, tmp = _temp_file(directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(key)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return key


def _temp_file(directory: Path) -> tuple[int, str]:
    name = directory / f"{TEMP_PREFIX}{secrets.token_hex(8)}"
    fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    return fd, str(name)


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
    return conn


_EXPECTED_SCHEMA: list[tuple[str, str, str | None]] | None = None


def _schema_of(conn: sqlite3.Connection) -> list[tuple[str, str, str | None]]:
    rows = conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY type, name").fetchall()
    return [(str(t), str(n), None if s is None else str(s)) for t, n, s in rows]


def _expected_schema() -> list[tuple[str, str, str | None]]:
    global _EXPECTED_SCHEMA  # noqa: PLW0603 - computed once per process
    if _EXPECTED_SCHEMA is None:
        conn = sqlite3.connect(":memory:")
        for statement in _SCHEMA:
            conn.execute(statement)
        _EXPECTED_SCHEMA = _schema_of(conn)
        conn.close()
    return _EXPECTED_SCHEMA


# ------------------------------------------------------------------------- the index


@dataclass(frozen=True, slots=True)
class IndexState:
    """What the index was built from."""

    context: IndexContext
    policy_digest: str
    source_fingerprint: str
    records: int


class IndexTampered(Exception):
    """A row or total read from the index failed its integrity check: rebuild and retry."""


class StaleIndex(Exception):
    """Internal: the stored index cannot be used as it is (the reason says why)."""


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
        return _load_memories(self.conn, ids)

    # -------------------------------------------------------------- row integrity

    def row_valid(self, values: Sequence[Any], mac: str) -> bool:
        """Check the per-row HMAC over every other column of the row (:data:`ROW_COLUMNS`)."""
        return hmac.compare_digest(_row_mac(self.key, values), mac)


# Every column of ``rows`` but ``mac``, in table order: the HMAC covers all of them, so a
# returned row whose filter columns or JSON were edited is detected.
ROW_COLUMNS = (
    "id", "actor", "kind", "lifecycle", "lifecycle_rank", "trust", "applicability", "evidence",
    "timestamp", "anchor_subject", "applies_subject", "content_bytes", "data_bytes",
    "search_units", "json", "deps", "fields",
)  # fmt: skip


_INSERT_ROW = "INSERT INTO rows VALUES (" + ", ".join("?" * (len(ROW_COLUMNS) + 1)) + ")"  # noqa: S608


def _row_mac(key: bytes, values: Sequence[Any]) -> str:
    # Keyed BLAKE2b (a MAC by construction) over length-prefixed columns, in one call.
    parts = []
    for value in values:
        part = value if isinstance(value, bytes) else str(value).encode("utf-8")
        parts.append(struct.pack(">Q", len(part)))
        parts.append(part)
    return hashlib.blake2b(b"".join(parts), key=key, digest_size=32).hexdigest()


def _meta(conn: sqlite3.Connection) -> dict[str, str]:
    return {str(k): str(v) for k, v in conn.execute("SELECT key, value FROM meta")}


def _side_file_ok(path: Path) -> bool:
    """A WAL or shared-memory file beside the index must be a private regular file of ours."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return True
    return (
        stat.S_ISREG(info.st_mode)
        and info.st_uid == os.geteuid()
        and info.st_nlink == 1
        and not stat.S_IMODE(info.st_mode) & 0o077
    )


def _open_existing(path: Path) -> sqlite3.Connection:
    for suffix in _SQLITE_SIDE_FILES:
        if not _side_file_ok(Path(str(path) + suffix)):
            raise StaleIndex(f"unsafe {suffix} file beside the index")
    try:
        conn = _connect(path)
    except sqlite3.DatabaseError as exc:
        raise StaleIndex("corrupt") from exc
    try:
        if _schema_of(conn) != _expected_schema():
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
    key = _load_key(directory)
    policy = _policy_at(repo, context.at_commit)
    refs = store.list_memory_refs(repo)
    if not rebuild and _check_private_file(path):
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
    streams = {ref.name: store.load_stream(repo, ref) for ref in refs}
    memories = store.collect_from(streams.values())
    fd, tmp = _temp_file(directory)
    os.close(fd)
    try:
        conn = _connect(tmp, building=True)
        conn.execute("BEGIN")
        for statement in _SCHEMA:
            conn.execute(statement)
        for ref in refs:
            _store_entries(conn, ref, streams[ref.name], replace_all=True)
        _store_envelopes(conn, memories)
        projection = project(
            memories,
            store.RepoProbe(repo),
            at_commit=context.at_commit,
            policy=policy,
            subject=context.subject,
            path=context.path,
        )
        records = _write_rows(conn, key, projection.rows, fresh=True)
        state = _write_meta(conn, context, policy, refs, records)
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


def _write_meta(
    conn: sqlite3.Connection,
    context: IndexContext,
    policy: PolicyContext,
    refs: Sequence[store.MemoryRef],
    records: int,
) -> IndexState:
    fingerprint = source_fingerprint(policy.digest, ((r.name, r.head) for r in refs))
    values = {
        "format": FORMAT,
        "at_commit": context.at_commit,
        "subject": context.subject,
        "path": context.path,
        "policy_digest": policy.digest,
        "source_fingerprint": fingerprint,
        "records": str(records),
    }
    conn.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", sorted(values.items()))
    return IndexState(context, policy.digest, fingerprint, records)


def _store_entries(
    conn: sqlite3.Connection,
    ref: store.MemoryRef,
    stream: Sequence[VerifiedMemory],
    *,
    replace_all: bool,
) -> None:
    if replace_all:
        conn.execute("DELETE FROM entries WHERE ref = ?", (ref.name,))
    conn.executemany(
        "INSERT INTO entries VALUES (?, ?, ?, ?)",
        [(ref.name, m.envelope.sequence, m.memory_id, m.commit) for m in stream],
    )
    # Sequences are 1..n without gaps (verified), so the largest is the count: O(log n).
    top = conn.execute("SELECT max(sequence) FROM entries WHERE ref = ?", (ref.name,)).fetchone()
    total = int(top[0] or 0)
    last = stream[-1].memory_id if stream else ""
    if not stream:
        row = conn.execute(
            "SELECT id FROM entries WHERE ref = ? ORDER BY sequence DESC LIMIT 1", (ref.name,)
        ).fetchone()
        last = str(row[0]) if row else ""
    conn.execute(
        "INSERT OR REPLACE INTO sources VALUES (?, ?, ?, ?)", (ref.name, ref.head, total, last)
    )


def _store_envelopes(conn: sqlite3.Connection, memories: Iterable[VerifiedMemory]) -> list[str]:
    """Insert envelopes not yet stored (keeping the smallest commit ID); return new IDs."""
    added: list[str] = []
    for m in memories:
        known = conn.execute("SELECT commit_id FROM envelopes WHERE id = ?", (m.memory_id,))
        row = known.fetchone()
        if row is None:
            conn.execute(
                "INSERT INTO envelopes VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    m.memory_id,
                    m.commit,
                    m.ref,
                    m.envelope.operation,
                    m.envelope.target,
                    m.payload,
                    m.signature,
                ),
            )
            added.append(m.memory_id)
        elif m.commit < str(row[0]):
            conn.execute(
                "UPDATE envelopes SET commit_id = ?, ref = ? WHERE id = ?",
                (m.commit, m.ref, m.memory_id),
            )
    return added


def row_values(row: Row) -> tuple[Any, ...]:
    """The stored columns of a projected row, in :data:`ROW_COLUMNS` order."""
    record = recall_record(row)
    data = record["data"]
    fields = search_fields(data)
    units = sum(len(value.encode("utf-8")) + 1 for _, value in fields)
    return (
        row.id,
        row.actor,
        row.kind,
        row.lifecycle,
        LIFECYCLE_RANK.get(row.lifecycle, 9),
        row.trust,
        row.applicability,
        row.evidence,
        row.timestamp,
        row.anchor.subject,
        row.record.applicability.subject,
        len(encode(row.record.content)),
        len(encode(data)),
        units,
        encode(record),
        encode([dependency_wire(d) for d in row.dependencies]),
        encode([value for _, value in fields]),  # the grep surface, in search_fields order
    )


GROUP_KEY = ("lifecycle_rank", "trust", "kind", "actor")
_GROUP_SQL = (
    "SELECT lifecycle_rank, trust, kind, actor, count(*), max(content_bytes), max(data_bytes),"
    " sum(search_units) FROM rows WHERE applicability = 'applicable' AND evidence = 'resolved'"
)


def _refresh_groups(
    conn: sqlite3.Connection, key: bytes, keys: Iterable[tuple[Any, ...]] | None
) -> None:
    """Recompute the totals of the given classes (all classes when ``keys`` is None)."""
    if keys is None:
        conn.execute("DELETE FROM groups")
        found = conn.execute(_GROUP_SQL + " GROUP BY 1, 2, 3, 4").fetchall()
    else:
        found = []
        for group in set(keys):
            conn.execute(
                "DELETE FROM groups WHERE lifecycle_rank = ? AND trust = ? AND kind = ?"
                " AND actor = ?",
                group,
            )
            found += conn.execute(
                _GROUP_SQL + " AND lifecycle_rank = ? AND trust = ? AND kind = ? AND actor = ?"
                " GROUP BY 1, 2, 3, 4",
                group,
            ).fetchall()
    conn.executemany(
        "INSERT INTO groups VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(*values, _row_mac(key, values)) for values in found],
    )


def _write_rows(conn: sqlite3.Connection, key: bytes, rows: Iterable[Row], *, fresh: bool) -> int:
    """Write (or rewrite) rows and their postings; return how many rows are new."""
    added = 0
    touched: list[tuple[Any, ...]] = []
    batch: dict[str, list[tuple[Any, ...]]] = {
        "rows": [], "topics": [], "paths": [], "tokens": [], "evidence_refs": [],
    }  # fmt: skip
    for row in rows:
        if fresh:
            added += 1
        else:
            old = conn.execute(
                "SELECT lifecycle_rank, trust, kind, actor FROM rows WHERE id = ?", (row.id,)
            ).fetchall()
            added += not old
            touched += old
            for table in batch:
                conn.execute(f"DELETE FROM {table} WHERE id = ?", (row.id,))  # noqa: S608
        values = row_values(row)
        touched.append((values[4], row.trust, row.kind, row.actor))
        batch["rows"].append((*values, _row_mac(key, values)))
        batch["topics"] += [(row.id, t) for t in row.record.topics]
        batch["paths"] += [(row.id, p.path) for p in row.anchor.paths]
        text = row.record.content + "\n" + "\n".join(row.record.topics)
        batch["tokens"] += [(t, row.id) for t in index_tokens(text)]
        batch["evidence_refs"] += [
            (e[len("memory:") :], row.id) for e in row.record.evidence if e.startswith("memory:")
        ]
    conn.executemany(_INSERT_ROW, batch["rows"])
    for table in ("topics", "paths", "tokens", "evidence_refs"):
        conn.executemany(f"INSERT OR IGNORE INTO {table} VALUES (?, ?)", batch[table])  # noqa: S608
    _refresh_groups(conn, key, None if fresh else touched)
    return added


# ------------------------------------------------------------------------- incremental


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
            _store_entries(conn, ref, suffix, replace_all=False)
            new_ids += _store_envelopes(conn, suffix)
        if new_ids:
            records += _reproject(repo, conn, key, context, policy, new_ids)
        state = _write_meta(conn, context, policy, refs, records)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return state


def _ids(conn: sqlite3.Connection, sql: str, args: Sequence[str]) -> set[str]:
    found: set[str] = set()
    for start in range(0, len(args), 500):
        chunk = list(args[start : start + 500])
        marks = ",".join("?" * len(chunk))
        found.update(str(r[0]) for r in conn.execute(sql.format(marks=marks), chunk))
    return found


def _load_memories(conn: sqlite3.Connection, ids: Iterable[str]) -> list[VerifiedMemory]:
    """Re-verify stored envelopes (hash and signature) before they are projected again."""
    out: list[VerifiedMemory] = []
    wanted = sorted(set(ids))
    for start in range(0, len(wanted), 500):
        chunk = wanted[start : start + 500]
        marks = ",".join("?" * len(chunk))
        for mid, commit, ref, payload, signature in conn.execute(
            f"SELECT id, commit_id, ref, payload, signature FROM envelopes WHERE id IN ({marks})",  # noqa: S608
            chunk,
        ):
            data = bytes(payload)
            if memory_id(data) != mid:
                raise StaleIndex("corrupt: stored payload does not match its ID")
            try:
                envelope = decode_envelope(data)
                verify_signature(envelope, data, str(signature))
            except InvalidInput as exc:
                raise StaleIndex("corrupt: stored envelope failed verification") from exc
            out.append(
                VerifiedMemory(str(mid), str(commit), data, envelope, str(signature), str(ref))
            )
    return out


def _reproject(  # noqa: PLR0917 - internal, one call site
    repo: pygit2.Repository,
    conn: sqlite3.Connection,
    key: bytes,
    context: IndexContext,
    policy: PolicyContext,
    new_ids: Sequence[str],
) -> int:
    """Re-project the rows a set of new memories can change (see the module docstring);
    return how many rows are new."""
    new = _load_memories(conn, new_ids)
    affected = {m.memory_id for m in new if m.envelope.operation in ("record", "supersede")}
    affected |= {m.envelope.target for m in new if m.envelope.target}
    # Rows whose own relationship named a memory that just arrived, or cite it as evidence.
    affected |= _ids(conn, "SELECT id FROM envelopes WHERE target IN ({marks})", new_ids)
    affected |= _ids(conn, "SELECT id FROM evidence_refs WHERE memory IN ({marks})", new_ids)
    affected = _ids(
        conn,
        "SELECT id FROM envelopes WHERE id IN ({marks}) AND operation IN ('record', 'supersede')",
        sorted(affected),
    )
    if not affected:
        return 0
    ordered = sorted(affected)
    # The memories those rows depend on: themselves, everything targeting them, their own
    # targets, and the memories their evidence names.
    needed = set(ordered)
    needed |= _ids(conn, "SELECT id FROM envelopes WHERE target IN ({marks})", ordered)
    needed |= _ids(
        conn, "SELECT target FROM envelopes WHERE id IN ({marks}) AND target != ''", ordered
    )
    subset = _load_memories(conn, needed)
    cited = {
        e[len("memory:") :]
        for m in subset
        if m.memory_id in affected and m.envelope.record is not None
        for e in m.envelope.record.evidence
        if e.startswith("memory:")
    }
    extra = _ids(conn, "SELECT id FROM envelopes WHERE id IN ({marks})", sorted(cited - needed))
    subset += _load_memories(conn, extra)
    projection = project(
        subset,
        store.RepoProbe(repo),
        at_commit=context.at_commit,
        policy=policy,
        subject=context.subject,
        path=context.path,
    )
    rows = [row for row in projection.rows if row.id in affected]
    return _write_rows(conn, key, rows, fresh=False)


# ------------------------------------------------------------------------- verify


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
    if not _check_private_file(path):
        raise NotFound(
            "memory index missing", code="index-missing", hint="run 'pal memory index rebuild'"
        )
    key = _load_key(directory)
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
        projection = project(
            memories,
            store.RepoProbe(repo),
            at_commit=context.at_commit,
            policy=policy,
            subject=context.subject,
            path=context.path,
        )
        columns = ", ".join(ROW_COLUMNS)
        stored = {
            str(values[0]): (tuple(values), str(mac))
            for *values, mac in conn.execute(f"SELECT {columns}, mac FROM rows")  # noqa: S608
        }
        expected = {}
        for row in projection.rows:
            values = row_values(row)
            expected[row.id] = (values, _row_mac(key, values))
        if stored != expected or meta.get("records") != str(len(expected)):
            raise Conflict("memory index stale: derived projection changed", code="index-stale")
        stored_groups = sorted(tuple(g) for g in conn.execute("SELECT * FROM groups"))
        fresh_groups = sorted(
            (*values, _row_mac(key, values))
            for values in conn.execute(_GROUP_SQL + " GROUP BY 1, 2, 3, 4")
        )
        if stored_groups != fresh_groups:
            raise Conflict("memory index stale: derived projection changed", code="index-stale")
        stored_ids = {str(r[0]) for r in conn.execute("SELECT id FROM envelopes")}
        if stored_ids != {m.memory_id for m in memories}:
            raise Conflict("memory index stale: derived projection changed", code="index-stale")
        return IndexState(context, policy.digest, fingerprint, len(expected))
    finally:
        conn.close()


__all__ = [
    "FORMAT",
    "INDEX_NAME",
    "LIFECYCLE_RANK",
    "ROW_COLUMNS",
    "IndexContext",
    "IndexState",
    "IndexTampered",
    "MemoryIndex",
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
