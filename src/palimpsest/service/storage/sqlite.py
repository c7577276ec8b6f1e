"""The embedded store: SQLite in WAL mode in a data directory, file bytes beside it.

With :mod:`.schema` (tables and row helpers) and :mod:`.gitstore` (Memory Git's proposals,
reviews and nonces, on the same connection) this package is the only place of the service that
speaks SQL. This module keeps:

- the tree and grants (server-owned structure; members, groups and hashed credentials are in
  :mod:`.principals`, a base class of the store);
- the Memory Git history: ``changesets`` (immutable canonical documents, id = integrity digest)
  and ``refs`` (CAS-advanced heads), plus salted record ``bodies`` that ops name by digest;
- the projections of ``refs/shared/main``: ``records`` (current state), ``versions`` and the
  FTS5 index ``record_fts`` (plus ``edges`` and ``memory_counts``) — all re-derived from the
  changesets by ``Core.rebuild`` (``pal admin rebuild``);
- the idempotency table (uploaded files' bytes and small documents — jobs, named queries,
  snapshots, consolidation runs, harness settings — are in :mod:`.files`, another base).

Every write runs inside :meth:`SqliteStore.write`: one ``BEGIN IMMEDIATE`` transaction, so a
crash leaves either the whole changeset with its projection and index, or nothing. WAL with
``synchronous=NORMAL`` never loses a committed transaction to a process crash (kill -9);
``durability="full"`` also survives power loss at the cost of an fsync per write.
"""

from __future__ import annotations

import contextlib
import hashlib
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

from palimpsest import canonical
from palimpsest.service.model import Grant, Memory, Ref, unavailable
from palimpsest.service.storage.files import FileRows
from palimpsest.service.storage.principals import PrincipalRows
from palimpsest.service.storage.schema import (
    BM25,
    RANK,
    SCHEMA,
    SCHEMA_VERSION,
    Hit,
    grant_of,
    hash_secret,
    load,
    memory_of,
    priv_text,
)

MMAP_SIZE: Final = 1 << 34  # SQLite clamps it to its compiled maximum


class SqliteStore(PrincipalRows, FileRows):
    """One SQLite database plus a ``files/`` directory of content-addressed bytes."""

    def __init__(self, data_dir: Path, *, durability: str = "normal") -> None:
        try:
            data_dir.mkdir(parents=True, exist_ok=True)
            (data_dir / "files").mkdir(exist_ok=True)
            self.data_dir = data_dir
            self._db = sqlite3.connect(data_dir / "palimpsest.db", isolation_level=None,
                                       check_same_thread=False, timeout=30)
            self._db.row_factory = sqlite3.Row
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(
                f"PRAGMA synchronous={'FULL' if durability == 'full' else 'NORMAL'}")
            self._db.execute("PRAGMA foreign_keys=OFF")
            # Erase must not leave freed pages holding the erased bytes.
            self._db.execute("PRAGMA secure_delete=ON")
            self._db.execute("PRAGMA cache_size=-65536")
            # Read pages through a memory map: a recall probes ~1,000 random rows of a large
            # `records` table, and pread copies into the page cache were a third of its CPU.
            # Writes still go through write() and fsync, so durability is unchanged.
            self._db.execute(f"PRAGMA mmap_size={MMAP_SIZE}")
            # Checkpoint less often: each checkpoint fsyncs the database file.
            self._db.execute("PRAGMA wal_autocheckpoint=8192")
            self._db.executescript(SCHEMA)
            self._upgrade()
            self._db.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)",
                             (str(SCHEMA_VERSION),))
            self._db.execute("INSERT OR IGNORE INTO meta VALUES ('tree_gen', '0')")
            self._db.execute("INSERT OR IGNORE INTO meta VALUES ('principals_gen', '0')")
            rank = self._db.execute("SELECT v FROM record_fts_config WHERE k='rank'").fetchone()
            if rank is None or rank[0] != RANK:  # set once, not on every open
                self._db.execute("INSERT INTO record_fts(record_fts, rank) "
                                 "VALUES ('rank', ?)", (RANK,))
        except (OSError, sqlite3.Error) as exc:
            raise unavailable(f"cannot open the store in {data_dir}: {exc}") from exc
        self.lock = threading.RLock()
        self._in_tx = False
        self._peek: sqlite3.Connection | None = None  # see peek_principals_generation
        self._peek_lock = threading.Lock()
        self._db_path = data_dir / "palimpsest.db"

    def _upgrade(self) -> None:
        """Add projection columns that data directories made by older builds lack (their
        values are re-derived by ``pal admin rebuild``)."""
        have = {r["name"] for r in self._db.execute("PRAGMA table_info(records)")}
        for column in ("context_src", "thread", "when_at"):
            if column not in have:
                self._db.execute(f"ALTER TABLE records ADD COLUMN {column} TEXT")
        self._db.execute("CREATE INDEX IF NOT EXISTS records_context ON records(context_src)")

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self.lock, contextlib.suppress(sqlite3.Error):
            self._db.close()
        with self._peek_lock, contextlib.suppress(sqlite3.Error):
            if self._peek is not None:
                self._peek.close()

    # --- transactions ---------------------------------------------------------------------
    @contextmanager
    def write(self) -> Iterator[None]:
        """One ``BEGIN IMMEDIATE`` transaction: all of it commits, or none of it."""
        with self.lock:
            if self._in_tx:
                yield
                return
            try:
                self._db.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise unavailable(f"the store is busy: {exc}") from exc
            self._in_tx = True
            try:
                yield
            except sqlite3.Error as exc:
                # Disk full, I/O error, lock lost: nothing of this write stays, and the edge
                # sees memory_unavailable rather than an unexplained failure.
                with contextlib.suppress(sqlite3.Error):
                    self._db.execute("ROLLBACK")
                raise unavailable(f"the store could not complete the write: {exc}") from exc
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            else:
                try:
                    self._db.execute("COMMIT")
                except sqlite3.Error as exc:
                    with contextlib.suppress(sqlite3.Error):
                        self._db.execute("ROLLBACK")
                    raise unavailable(f"the store could not commit: {exc}") from exc
            finally:
                self._in_tx = False

    @contextmanager
    def read(self) -> Iterator[None]:
        """A consistent read (a deferred transaction) under the store lock."""
        with self.lock:
            if self._in_tx:
                yield
                return
            self._db.execute("BEGIN")
            self._in_tx = True
            try:
                yield
            except sqlite3.Error as exc:
                raise unavailable(f"the store could not complete the read: {exc}") from exc
            finally:
                self._in_tx = False
                self._db.execute("COMMIT")

    def changes(self) -> int:
        """Rows inserted, updated or deleted on this connection so far (triggers included):
        a write that did not move it left nothing to undo."""
        return self._db.total_changes

    def connection(self) -> sqlite3.Connection:
        """The connection, for sibling SQL modules of this package (storage/gitstore.py) that
        must write in the same transactions (use :meth:`write` / :meth:`read` around it)."""
        return self._db

    # --- meta -----------------------------------------------------------------------------
    def tree_generation(self) -> int:
        """Bumped on every change of the tree or grants (caches key on it)."""
        row = self._one("SELECT value FROM meta WHERE key='tree_gen'")
        return int(row["value"]) if row else 0

    def bump_tree(self) -> None:
        """Invalidate tree caches (inside a write)."""
        self._x("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key='tree_gen'")

    # --- tree and grants ------------------------------------------------------------------
    def all_memories(self) -> list[Memory]:
        """Every memory (the tree is small next to the records)."""
        return [memory_of(r) for r in self._q("SELECT * FROM memories")]

    def all_grants(self) -> list[Grant]:
        """Every explicit grant."""
        return [grant_of(r) for r in self._q("SELECT * FROM grants")]

    def insert_memory(self, m: Memory) -> None:
        """Add a node."""
        self._x("INSERT INTO memories VALUES (?,?,?,?,?,?,?,?,?)",
                (m.id, m.name, m.description, m.parent_id, int(m.restricted), m.provider,
                 m.created_by, m.created_at, m.updated_at))
        self.bump_tree()

    def update_memory(self, m: Memory) -> None:
        """Replace a node's client fields."""
        self._x("UPDATE memories SET name=?, description=?, parent_id=?, restricted=?, "
                "updated_at=? WHERE id=?",
                (m.name, m.description, m.parent_id, int(m.restricted), m.updated_at, m.id))
        self.bump_tree()

    def delete_memories(self, ids: Sequence[str]) -> None:
        """Remove nodes with everything they hold: grants, history (on every ref), bodies,
        file bytes, projections, docs."""
        files: set[str] = set()
        for mid in ids:
            for r in self._q("SELECT n, id FROM records WHERE memory_id=?", (mid,)):
                self._x("DELETE FROM record_fts WHERE rowid=?", (r["n"],))
            digests = {r["body_digest"] for r in self._q(
                "SELECT body_digest FROM versions WHERE memory_id=?", (mid,))}
            for r in self._q("SELECT doc FROM changesets WHERE memory_id=?", (mid,)):
                for op in load(r["doc"]).get("ops", ()):
                    digest = (op.get("payload") or {}).get("body_digest")
                    if isinstance(digest, str):
                        digests.add(digest)  # bodies of unmerged refs too
            for d in digests:
                found = self.body(d)
                if found is not None:
                    files.update(p["file"]["id"] for p in load(found[1]).get("content", ())
                                 if p.get("type") == "file" and isinstance(p.get("file"), dict))
                self._x("DELETE FROM bodies WHERE digest=?", (d,))
            for table in ("records", "versions", "changesets", "refs", "grants", "edges",
                          "memory_counts"):
                self._x(f"DELETE FROM {table} WHERE memory_id=?", (mid,))  # noqa: S608
            self._x("DELETE FROM docs WHERE memory_id=?", (mid,))
            self._x("DELETE FROM idempotency WHERE scope=?", (mid,))
            self._x("DELETE FROM memories WHERE id=?", (mid,))
        for fid in files:
            self.delete_file(fid)
        self.bump_tree()

    def record_counts(self, ids: Sequence[str]) -> dict[str, int]:
        """Active record counts per memory (kept by the projection, not counted per read)."""
        out = dict.fromkeys(ids, 0)
        if ids:
            marks = ",".join("?" * len(ids))
            for r in self._q(f"SELECT memory_id, active FROM memory_counts "  # noqa: S608
                             f"WHERE memory_id IN ({marks})", tuple(ids)):
                out[r["memory_id"]] = int(r["active"])
        return out

    def _count(self, memory_id: str, delta: int) -> None:
        self._x("INSERT INTO memory_counts VALUES (?, ?) ON CONFLICT(memory_id) DO UPDATE "
                "SET active = active + excluded.active", (memory_id, delta))

    def upsert_grant(self, g: Grant) -> Grant:
        """One grant per principal per node: a second replaces the first (keeping its id)."""
        row = self._one("SELECT id, created_at FROM grants WHERE memory_id=? AND principal=?",
                        (g.memory_id, g.principal))
        if row is not None:
            self._x("UPDATE grants SET privileges=? WHERE id=?",
                    (priv_text(g.privileges), row["id"]))
            g = Grant(row["id"], g.memory_id, g.principal, g.privileges, row["created_at"])
        else:
            self._x("INSERT INTO grants VALUES (?,?,?,?,?)",
                    (g.id, g.memory_id, g.principal, priv_text(g.privileges), g.created_at))
        self.bump_tree()
        return g

    def delete_grant(self, memory_id: str, grant_id: str) -> bool:
        """Remove one grant; False when the node has no such grant."""
        n = self._x("DELETE FROM grants WHERE id=? AND memory_id=?", (grant_id, memory_id))
        self.bump_tree()
        return n > 0

    # --- idempotency ----------------------------------------------------------------------
    def replay(self, principal: str, scope: str, key: str) -> tuple[str, Any] | None:
        """``(request digest, stored response)`` for a used key."""
        r = self._one("SELECT digest, response FROM idempotency WHERE principal=? AND scope=? "
                      "AND key=?", (principal, scope, key))
        return (r["digest"], load(r["response"])) if r else None

    def remember_response(self, principal: str, scope: str, key: str, digest: str,  # noqa: PLR0917
                          response: Any, now: int) -> None:
        """Store the response of a first request under its key."""
        self._x("INSERT INTO idempotency VALUES (?,?,?,?,?,?)",
                (principal, scope, key, digest, canonical.encode(response), now))

    # --- history --------------------------------------------------------------------------
    def ref(self, memory_id: str, name: str) -> Ref | None:
        """One ref or ``None``."""
        r = self._one("SELECT * FROM refs WHERE memory_id=? AND name=?", (memory_id, name))
        return Ref(r["memory_id"], r["name"], r["head"], bool(r["protected"]), r["created_by"],
                   r["created_at"], r["updated_at"]) if r else None

    def refs(self, memory_id: str) -> list[Ref]:
        """Refs of a memory by name."""
        out = []
        for r in self._q("SELECT name FROM refs WHERE memory_id=? ORDER BY name", (memory_id,)):
            ref = self.ref(memory_id, r["name"])
            if ref is not None:
                out.append(ref)
        return out

    def set_ref(self, ref: Ref) -> None:
        """Create or move a ref (the caller has done the CAS check inside this transaction)."""
        self._x("INSERT INTO refs VALUES (?,?,?,?,?,?,?) ON CONFLICT(memory_id, name) DO "
                "UPDATE SET head=excluded.head, updated_at=excluded.updated_at",
                (ref.memory_id, ref.name, ref.head, int(ref.protected), ref.created_by,
                 ref.created_at, ref.updated_at))

    def insert_changeset(self, cid: str, memory_id: str, ref_name: str, author: str, key: str,  # noqa: PLR0917
                         created_at: str, doc: dict[str, Any]) -> None:
        """Append an immutable changeset document (ignored if the same id exists)."""
        self._x("INSERT OR IGNORE INTO changesets (id, memory_id, ref_name, author, "
                "idempotency_key, created_at, doc) VALUES (?,?,?,?,?,?,?)",
                (cid, memory_id, ref_name, author, key, created_at, canonical.encode(doc)))

    def changeset_doc(self, cid: str) -> dict[str, Any] | None:
        """The stored document of a changeset."""
        r = self._one("SELECT doc FROM changesets WHERE id=?", (cid,))
        if r is None:
            return None
        doc: dict[str, Any] = load(r["doc"])
        return doc

    def changeset_docs(self, memory_id: str | None = None) -> Iterator[dict[str, Any]]:
        """Every changeset in append order (a topological order), optionally of one memory."""
        cur = self._db.execute("SELECT doc FROM changesets WHERE (? IS NULL OR memory_id=?) "
                               "ORDER BY seq", (memory_id, memory_id))
        for r in cur.fetchall():
            yield load(r["doc"])

    # --- bodies ---------------------------------------------------------------------------
    def put_body(self, digest: str, salt: bytes, data: bytes) -> None:
        """Store a salted record body."""
        self._x("INSERT OR IGNORE INTO bodies VALUES (?,?,?)", (digest, salt, data))

    def body(self, digest: str) -> tuple[bytes, bytes] | None:
        """``(salt, data)`` of a body, ``None`` once erased."""
        r = self._one("SELECT salt, data FROM bodies WHERE digest=?", (digest,))
        if r is None or not isinstance(r["salt"], bytes) or not isinstance(r["data"], bytes):
            return None  # absent, or damaged into another type: treated as gone
        return (r["salt"], r["data"])

    def delete_body(self, digest: str) -> None:
        """Erase a body's bytes."""
        self._x("DELETE FROM bodies WHERE digest=?", (digest,))

    # --- projection -----------------------------------------------------------------------
    def record_head(self, record_id: str) -> sqlite3.Row | None:
        """The current row of a record (``n, id, memory_id, version, status, …``)."""
        return self._one("SELECT * FROM records WHERE id=?", (record_id,))

    def project_version(self, *, record_id: str, memory_id: str, version: int, type: str,
                        body_digest: str, written_at: str, written_by: str, extra: str,
                        changeset_id: str, standing: bool, fts_text: str,
                        edges: Sequence[tuple[str, str]] = (), existing: int | None = None,
                        was_forgotten: bool = False, thread: str | None = None,
                        when: str | None = None) -> None:
        """Apply a new version: supersede the previous one, move the record, reindex."""
        if version > 1:
            self._x("UPDATE versions SET invalidated_at=? WHERE record_id=? AND version=?",
                    (written_at, record_id, version - 1))
        self._x("INSERT INTO versions VALUES (?,?,?,?,?,NULL,NULL,?,?,?)",
                (record_id, version, memory_id, body_digest, written_at, written_by, extra,
                 changeset_id))
        if existing is None:
            prev = self._previous_episode(memory_id, None, None, thread) \
                if type == "episode" else None
            context = self._fts_text(prev["n"]) if prev is not None else ""
            cur = self._db.execute(
                "INSERT INTO records (id, memory_id, type, version, status, written_at, "
                "body_digest, standing, context_src, thread, when_at) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (record_id, memory_id, type, version, "active", written_at, body_digest,
                 int(standing), prev["id"] if prev is not None else None, thread, when))
            n = cur.lastrowid
            self._count(memory_id, 1)
        else:
            n = existing
            if was_forgotten:
                self._count(memory_id, 1)
            self._x("UPDATE records SET version=?, status='active', written_at=?, "
                    "body_digest=?, standing=?, thread=?, when_at=? WHERE n=?",
                    (version, written_at, body_digest, int(standing), thread, when, n))
            row = self._one("SELECT context FROM record_fts WHERE rowid=?", (n,))
            context = row["context"] if row is not None else ""  # kept as first written
            self._x("DELETE FROM record_fts WHERE rowid=?", (n,))
        self._x("INSERT INTO record_fts(rowid, text, context) VALUES (?,?,?)",
                (n, fts_text, context))
        if existing is not None:
            self._x("DELETE FROM edges WHERE src=?", (record_id,))
        for dst, rel in edges:
            self._x("INSERT INTO edges VALUES (?,?,?,?)", (record_id, dst, rel, memory_id))

    def _previous_episode(self, memory_id: str, before: int | None, skip: str | None,
                          thread: str | None) -> sqlite3.Row | None:
        """The episode written last in ``memory_id`` (before row ``before``; not ``skip``),
        or ``None`` when it belongs to another conversation than ``thread``: the words that
        closed the last conversation are not the context of the first turn of a new one."""
        prev = self._one("SELECT n, id, thread FROM records WHERE memory_id=? AND "
                         "type='episode' AND (? IS NULL OR n < ?) AND id IS NOT ? "
                         "ORDER BY n DESC LIMIT 1", (memory_id, before, before, skip))
        if prev is not None and thread is not None and prev["thread"] != thread:
            return None
        return prev

    def _fts_text(self, n: int) -> str:
        row = self._one("SELECT text FROM record_fts WHERE rowid=?", (n,))
        return str(row["text"]) if row is not None else ""

    def project_forget(self, record_id: str, at: str) -> None:
        """Mark the current version forgotten (its index entry stays; reads filter status)."""
        head = self.record_head(record_id)
        if head is None:
            return
        self._x("UPDATE versions SET forgotten_at=? WHERE record_id=? AND version=?",
                (at, record_id, head["version"]))
        self._x("UPDATE records SET status='forgotten' WHERE n=?", (head["n"],))
        if head["status"] == "active":
            self._count(head["memory_id"], -1)

    def project_erase(self, record_id: str) -> list[str]:
        """Remove every version, body and index entry; returns the file sha256s it named."""
        head = self.record_head(record_id)
        digests = [r["body_digest"] for r in self._q(
            "SELECT body_digest FROM versions WHERE record_id=?", (record_id,))]
        for d in digests:
            self.delete_body(d)
        self._x("DELETE FROM versions WHERE record_id=?", (record_id,))
        self._x("DELETE FROM edges WHERE src=?", (record_id,))
        if head is not None:
            if head["status"] == "active":
                self._count(head["memory_id"], -1)
            self._x("DELETE FROM record_fts WHERE rowid=?", (head["n"],))
            self._x("DELETE FROM records WHERE n=?", (head["n"],))
            # Episodes indexed with this record's words as context take the episode before
            # it instead, exactly as a rebuild (where this record is never an episode) does.
            for dep in self._q("SELECT n, memory_id, thread FROM records WHERE context_src=?",
                               (record_id,)):
                prev = self._previous_episode(dep["memory_id"], dep["n"], record_id,
                                              dep["thread"])
                self._x("UPDATE records SET context_src=? WHERE n=?",
                        (prev["id"] if prev is not None else None, dep["n"]))
                self._x("UPDATE record_fts SET context=? WHERE rowid=?",
                        (self._fts_text(prev["n"]) if prev is not None else "", dep["n"]))
        return digests

    def projection_fingerprint(self) -> str:
        """A digest of every projection row (records, versions, index text, edges, counts),
        independent of row numbers, so a rebuild can prove it reproduced the same state."""
        h = hashlib.sha256()
        queries = (
            "SELECT r.id, r.memory_id, r.type, r.version, r.status, r.written_at, "
            "r.body_digest, r.standing, r.context_src, r.thread, r.when_at, f.text, f.context "
            "FROM records r LEFT JOIN record_fts f ON f.rowid = r.n ORDER BY r.id",
            "SELECT * FROM versions ORDER BY record_id, version",
            "SELECT src, dst, rel, memory_id FROM edges ORDER BY src, dst, rel",
            "SELECT memory_id, active FROM memory_counts WHERE active != 0 ORDER BY memory_id",
        )
        for sql in queries:
            for row in self._db.execute(sql):
                h.update(repr(tuple(row)).encode("utf-8"))
            h.update(b"\x00")
        return h.hexdigest()

    def compact_after_erase(self) -> None:
        """Make erased bytes unrecoverable from the files: FTS5 keeps deleted terms in old
        index segments until they merge, and the WAL keeps old page images until a
        checkpoint. Rewrites the index (cost grows with its size; erase is rare)."""
        with self.write():
            self._x("INSERT INTO record_fts(record_fts) VALUES ('optimize')")
        with self.lock:
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def clear_projections(self) -> None:
        """Drop every projection (records, versions, index) before a rebuild."""
        self._x("DELETE FROM records")
        self._x("DELETE FROM versions")
        self._x("DELETE FROM record_fts")
        self._x("DELETE FROM edges")
        self._x("DELETE FROM memory_counts")

    # --- record reads ---------------------------------------------------------------------
    def version_row(self, record_id: str, version: int) -> sqlite3.Row | None:
        """One version row joined with its body."""
        return self._one("SELECT v.*, b.salt, b.data FROM versions v LEFT JOIN bodies b ON "
                         "b.digest=v.body_digest WHERE v.record_id=? AND v.version=?",
                         (record_id, version))

    def versions(self, record_id: str) -> list[sqlite3.Row]:
        """Every version of a record, oldest first."""
        return self._q("SELECT v.*, b.salt, b.data FROM versions v LEFT JOIN bodies b ON "
                       "b.digest=v.body_digest WHERE v.record_id=? ORDER BY v.version",
                       (record_id,))

    def version_at(self, record_id: str, as_of: str) -> sqlite3.Row | None:
        """The version current at ``as_of``."""
        return self._one("SELECT v.*, b.salt, b.data FROM versions v LEFT JOIN bodies b ON "
                         "b.digest=v.body_digest WHERE v.record_id=? AND v.written_at<=? "
                         "AND (v.invalidated_at IS NULL OR v.invalidated_at>?) ",
                         (record_id, as_of, as_of))

    def list_current(self, memory_id: str, statuses: Sequence[str], type: str | None,
                     before: int | None, limit: int) -> list[sqlite3.Row]:
        """Current records of one memory, newest first, keyset-paginated on ``n``."""
        marks = ",".join("?" * len(statuses))
        sql = (f"SELECT r.n, v.*, b.salt, b.data FROM records r JOIN versions v ON "  # noqa: S608
               f"v.record_id=r.id AND v.version=r.version LEFT JOIN bodies b ON "
               f"b.digest=v.body_digest WHERE r.memory_id=? AND r.status IN ({marks}) "
               f"AND (? IS NULL OR r.type=?) AND (? IS NULL OR r.n<?) ORDER BY r.n DESC LIMIT ?")
        return self._q(sql, (memory_id, *statuses, type, type, before, before, limit))

    def list_at(self, memory_ids: Sequence[str], as_of: str, limit: int,
                offset: int = 0) -> list[sqlite3.Row]:
        """Versions current at ``as_of`` across memories, newest first."""
        marks = ",".join("?" * len(memory_ids))
        sql = (f"SELECT v.*, b.salt, b.data FROM versions v LEFT JOIN bodies b ON "  # noqa: S608
               f"b.digest=v.body_digest WHERE v.memory_id IN ({marks}) AND v.written_at<=? "
               f"AND (v.invalidated_at IS NULL OR v.invalidated_at>?) "
               f"ORDER BY v.written_at DESC, v.record_id LIMIT ? OFFSET ?")
        return self._q(sql, (*memory_ids, as_of, as_of, limit, offset))

    def current_rows(self, ns: Sequence[int]) -> list[sqlite3.Row]:
        """Current versions of records by projection row number (order not kept)."""
        if not ns:
            return []
        marks = ",".join("?" * len(ns))
        sql = (f"SELECT r.n, r.status AS rstatus, v.*, b.salt, b.data FROM records r "  # noqa: S608
               f"JOIN versions v ON v.record_id=r.id AND v.version=r.version LEFT JOIN bodies b "
               f"ON b.digest=v.body_digest WHERE r.n IN ({marks})")
        return self._q(sql, tuple(ns))

    def newest_ns(self, memory_ids: Sequence[str], statuses: Sequence[str], limit: int
                  ) -> list[int]:
        """Newest record row numbers across memories (for filter-only recall)."""
        if not memory_ids:
            return []
        m1 = ",".join("?" * len(memory_ids))
        m2 = ",".join("?" * len(statuses))
        sql = (f"SELECT n FROM records WHERE memory_id IN ({m1}) AND status IN ({m2}) "  # noqa: S608
               f"ORDER BY n DESC LIMIT ?")
        return [r["n"] for r in self._q(sql, (*memory_ids, *statuses, limit))]

    def standing_rows(self, memory_id: str) -> list[sqlite3.Row]:
        """Active standing records of a memory, oldest first."""
        return self._q("SELECT r.n, v.*, b.salt, b.data FROM records r JOIN versions v ON "
                       "v.record_id=r.id AND v.version=r.version LEFT JOIN bodies b ON "
                       "b.digest=v.body_digest WHERE r.memory_id=? AND r.standing=1 AND "
                       "r.status='active' ORDER BY r.n", (memory_id,))

    def search(self, match: str, memory_ids: Sequence[str], statuses: Sequence[str],  # noqa: PLR0917
               types: Sequence[str] | None, limit: int, offset: int = 0,
               bound: int | None = None) -> list[Hit]:
        """BM25 over the text index, restricted to records of ``memory_ids`` with a status in
        ``statuses`` (and a type in ``types``): ``(row number, score, analysed text)``, best
        first. With ``bound``, only the newest ``bound`` matches are ranked (terms too common
        to rank every posting within the latency budget).

        The FTS index drives the join (CROSS JOIN fixes the order): reach never widens what is
        matched, it only drops rows, and no record outside the reach is ever returned.
        """
        m1 = ",".join("?" * len(memory_ids))
        m2 = ",".join("?" * len(statuses))
        where = (f"record_fts MATCH ? AND r.memory_id IN ({m1}) AND r.status IN ({m2})")
        args: list[Any] = [match, *memory_ids, *statuses]
        if types:
            where += f" AND r.type IN ({','.join('?' * len(types))})"
            args.extend(types)
        base = f"FROM record_fts f CROSS JOIN records r ON r.n = f.rowid WHERE {where}"
        # Only row numbers and scores go through the sort; texts are read for the winners.
        if bound is None:
            rows = self._q(f"SELECT f.rowid AS n, f.rank AS s {base} "
                           f"ORDER BY f.rank LIMIT ? OFFSET ?", (*args, limit, offset))
        else:
            rows = self._q(f"SELECT n, s FROM (SELECT f.rowid AS n, {BM25} AS s "  # noqa: S608
                           f"{base} ORDER BY f.rowid DESC LIMIT ?) ORDER BY s LIMIT ?",
                           (*args, bound, limit))
        if not rows:
            return []
        marks = ",".join("?" * len(rows))
        more = {r["n"]: r for r in self._q(
            f"SELECT f.rowid AS n, f.text AS text, r.thread AS thread, r.when_at AS when_at, "  # noqa: S608
            f"p.n AS follows FROM record_fts f JOIN records r ON r.n = f.rowid "
            f"LEFT JOIN records p ON p.id = r.context_src WHERE f.rowid IN ({marks})",
            [r["n"] for r in rows])}
        out = []
        for r in rows:
            m = more.get(r["n"])
            out.append(Hit(int(r["n"]), -float(r["s"]), m["text"] if m else "",
                           m["thread"] if m else None, m["when_at"] if m else None,
                           m["follows"] if m else None))
        return out

    def term_docs(self, terms: Sequence[str]) -> dict[str, int]:
        """How many indexed records hold each term (FTS5 vocabulary, all columns)."""
        out: dict[str, int] = {}
        for term in terms:
            r = self._one("SELECT doc FROM record_vocab WHERE term=?", (term,))
            out[term] = int(r["doc"]) if r else 0
        return out

    def memory_of_records(self, record_ids: Sequence[str]) -> dict[str, str]:
        """Which memory holds each record id (for references and graph edges)."""
        out: dict[str, str] = {}
        for rid in record_ids:
            r = self._one("SELECT memory_id FROM records WHERE id=?", (rid,))
            if r is not None:
                out[rid] = r["memory_id"]
        return out

    def edges_touching(self, record_ids: Sequence[str]) -> list[sqlite3.Row]:
        """Edges whose source or target is one of ``record_ids`` (``src, dst, rel,
        memory_id`` = the source's memory)."""
        if not record_ids:
            return []
        marks = ",".join("?" * len(record_ids))
        sql = (f"SELECT DISTINCT src, dst, rel, memory_id FROM edges WHERE src IN ({marks}) "  # noqa: S608
               f"OR dst IN ({marks})")
        return self._q(sql, (*record_ids, *record_ids))

    def forget_responses(self, scope: str, record_id: str) -> None:
        """Drop stored idempotent responses that carry an erased record's content."""
        self._x("DELETE FROM idempotency WHERE scope=? AND instr(response, ?) > 0",
                (scope, record_id.encode()))

    def counts(self) -> dict[str, int]:
        """Row counts reported by a rebuild."""
        out = {}
        for table in ("changesets", "records", "versions"):
            r = self._one(f"SELECT COUNT(*) AS c FROM {table}")  # noqa: S608
            out[table] = int(r["c"]) if r else 0
        r = self._one("SELECT COUNT(*) AS c FROM record_fts")
        out["indexed"] = int(r["c"]) if r else 0
        return out


__all__ = ["Hit", "SqliteStore", "hash_secret", "load"]
