"""The embedded store: SQLite in WAL mode in a data directory, file bytes beside it.

With :mod:`.schema` (tables and row helpers) and :mod:`.gitstore` (Memory Git's proposals,
reviews and nonces, on the same connection) this package is the only place of the service that
speaks SQL. This module keeps:

- the tree and grants (server-owned structure; members, groups and hashed credentials are in
  :mod:`.principals`, a base class of the store);
- the history: ``changesets`` (immutable canonical documents, id = integrity digest) and
  ``refs`` (CAS-advanced heads), plus ``bodies``: record bodies and Memory Git payloads,
  content-addressed (SHA-256 of their canonical bytes), that ops name by digest;
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
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

from palimpsest import canonical
from palimpsest.errors import Conflict, Unavailable
from palimpsest.service.model import (
    CAS_MISMATCH,
    MEMORY_UNAVAILABLE,
    Grant,
    Memory,
    Ref,
    unavailable,
)
from palimpsest.service.storage.changesets import digest_key
from palimpsest.service.storage.files import FileRows, private_dir, private_file
from palimpsest.service.storage.memorygit import GitStore
from palimpsest.service.storage.principals import PrincipalRows
from palimpsest.service.storage.records import RecordRows
from palimpsest.service.storage.schema import (
    RANK,
    SCHEMA,
    SCHEMA_VERSION,
    TERMS_TRIGGERS,
    Hit,
    grant_of,
    hash_secret,
    load,
    memory_of,
    priv_text,
)

MMAP_SIZE: Final = 1 << 34  # SQLite clamps it to its compiled maximum


class StoreVersionError(Unavailable):
    """The data directory holds a store of another schema version."""

    def __init__(self, message: str, *, hint: str) -> None:
        super().__init__(message, code=MEMORY_UNAVAILABLE, hint=hint)


class SqliteStore(PrincipalRows, FileRows, RecordRows):
    """One SQLite database plus a ``files/`` directory of content-addressed bytes."""

    def __init__(self, data_dir: Path, *, durability: str = "normal") -> None:
        try:
            private_dir(data_dir)  # 0700 / 0600 whatever the umask: no other user reads memory
            private_dir(data_dir / "files")
            for name in ("palimpsest.db", "palimpsest.db-wal", "palimpsest.db-shm"):
                if name == "palimpsest.db" or (data_dir / name).exists():
                    private_file(data_dir / name)
            self.data_dir = data_dir
            self._db = sqlite3.connect(data_dir / "palimpsest.db", isolation_level=None,
                                       check_same_thread=False, timeout=30)
            self._db.row_factory = sqlite3.Row
            self._check_schema(data_dir)  # before anything writes to the file
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
            self._add_terms()
            self._db.executescript(TERMS_TRIGGERS)
            self._db.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)",
                             (str(SCHEMA_VERSION),))
            self._db.execute("INSERT OR IGNORE INTO meta VALUES ('erase_gen', '0')")
            self._db.execute("INSERT OR IGNORE INTO meta VALUES ('tree_gen', '0')")
            self._db.execute("INSERT OR IGNORE INTO meta VALUES ('principals_gen', '0')")
            rank = self._db.execute("SELECT v FROM record_fts_config WHERE k='rank'").fetchone()
            if rank is None or rank[0] != RANK:  # set once, not on every open
                self._db.execute("INSERT INTO record_fts(record_fts, rank) "
                                 "VALUES ('rank', ?)", (RANK,))
        except StoreVersionError:
            self._db.close()
            raise
        except (OSError, sqlite3.Error) as exc:
            raise unavailable(f"cannot open the store in {data_dir}: {exc}") from exc
        self.lock = threading.RLock()
        self._in_tx = False
        self._keys, self._names, self._pending = {}, {}, {}  # see schema.Names
        self._writers = {}
        self._seqs, self._new_seqs = {}, {}  # see changesets.ChangesetRows
        self._review: GitStore | None = None
        self._signer = None  # see changesets.ChangesetRows.set_signer
        self._peek: sqlite3.Connection | None = None  # see peek_principals_generation
        self._peek_lock = threading.Lock()
        self._db_path = data_dir / "palimpsest.db"

    def _check_schema(self, data_dir: Path) -> None:
        """Refuse a database another version of the store wrote: never misread it."""
        tables = {r[0] for r in self._db.execute(
            "SELECT name FROM sqlite_master WHERE type='table'")}
        if not tables:
            return  # a new database
        row = self._db.execute("SELECT value FROM meta WHERE key='schema'").fetchone() \
            if "meta" in tables else None
        found = row[0] if row is not None else "none"
        if found != str(SCHEMA_VERSION):
            raise StoreVersionError(
                f"the store in {data_dir} has schema {found}; this version reads schema "
                f"{SCHEMA_VERSION}", hint=f"convert it with: pal admin --data-dir {data_dir} "
                f"migrate (the original is kept beside it)")

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
            committed = False
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
                    committed = True
                except sqlite3.Error as exc:
                    with contextlib.suppress(sqlite3.Error):
                        self._db.execute("ROLLBACK")
                    raise unavailable(f"the store could not commit: {exc}") from exc
            finally:
                self._in_tx = False
                self._settle_names(committed)
                self._settle_seqs(committed)

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

    def review_store(self) -> GitStore:
        """Memory Git's review tables over this store, in the same transactions (made once)."""
        if self._review is None:
            self._review = GitStore(self)
        return self._review

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
        """Add a node (with its integer key: a reach names memories that hold no record yet,
        and a read must find every one of them among the keys it keeps)."""
        self._x("INSERT INTO memories VALUES (?,?,?,?,?,?,?,?,?)",
                (m.id, m.name, m.description, m.parent_id, int(m.restricted), m.provider,
                 m.created_by, m.created_at, m.updated_at))
        self._key(m.id)
        self.bump_tree()

    def update_memory(self, m: Memory) -> None:
        """Replace a node's client fields."""
        self._x("UPDATE memories SET name=?, description=?, parent_id=?, restricted=?, "
                "updated_at=? WHERE id=?",
                (m.name, m.description, m.parent_id, int(m.restricted), m.updated_at, m.id))
        self.bump_tree()

    def delete_memories(self, ids: Sequence[str]) -> None:
        """Remove nodes with everything they hold: grants, history (on every ref), bodies,
        file bytes, projections, docs. A body another memory's record also holds (the same
        words written there) stays that record's."""
        files: set[str] = set()
        for mid in ids:
            mem = self._known(mid)
            rows = self._q("SELECT n, body FROM records WHERE mem=?", (mem,)) if mem else []
            ns = [r["n"] for r in rows]
            digests = self.changeset_digests(mid)  # bodies of unmerged refs too
            digests.update(_hex(r["body"]) for r in rows)
            for n in ns:
                digests.update(_hex(r["body"]) for r in self._q(
                    "SELECT body FROM versions WHERE n=?", (n,)))
                self._x("DELETE FROM record_fts WHERE rowid=?", (n,))
                self._x("DELETE FROM versions WHERE n=?", (n,))
            self._x("DELETE FROM records WHERE mem=?", (mem,))
            for d in sorted(digests):
                key = digest_key(d)
                if key is not None and self._one(
                        "SELECT 1 FROM records WHERE body=? UNION ALL SELECT 1 FROM versions "
                        "WHERE body=? LIMIT 1", (key, key)) is not None:
                    continue
                found = self.body(d)
                if found is not None:
                    content = load(found)
                    parts = content.get("content", ()) if isinstance(content, dict) else ()
                    files.update(p["file"]["id"] for p in parts if isinstance(p, dict)
                                 and p.get("type") == "file" and isinstance(p.get("file"), dict))
                self._drop_body(d)
            self._x("DELETE FROM signatures WHERE cs IN (SELECT seq FROM changesets "
                    "WHERE mem=?)", (mem,))
            self._x("DELETE FROM changesets WHERE mem=?", (mem,))
            self._x("DELETE FROM idempotency WHERE scope=?", (mem,))
            for table in ("refs", "grants", "edges", "memory_counts", "docs"):
                self._x(f"DELETE FROM {table} WHERE memory_id=?", (mid,))  # noqa: S608
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
        who, where = self._known(principal), self._known(scope)
        if who is None or where is None:
            return None
        r = self._one("SELECT digest, response FROM idempotency WHERE scope=? AND principal=? "
                      "AND key=?", (where, who, key))
        return (_digest_text(r["digest"]), load(r["response"])) if r else None

    def remember_response(self, principal: str, scope: str, key: str, digest: str,  # noqa: PLR0917
                          response: Any, now: int) -> None:
        """Store the response of a first request under its key."""
        try:
            self._x("INSERT INTO idempotency VALUES (?,?,?,?,?,?)",
                    (self._key(scope), self._key(principal), key,
                     digest_key(digest) or digest.encode(), canonical.encode(response), now))
        except sqlite3.IntegrityError as exc:
            raise Conflict("a concurrent request used this idempotency key",
                           code="idempotency_race", hint="retry to read the winner") from exc

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

    def advance_ref(self, ref: Ref, *, expected: str | None) -> None:
        """Compare-and-swap: point ``ref.name`` at ``ref.head`` only while it still holds
        ``expected`` (``None``: the ref is new or has no head yet), else cas_mismatch and
        nothing moves. The ref is created when it does not exist and nothing was expected."""
        moved = self._x("UPDATE refs SET head=?, updated_at=? WHERE memory_id=? AND name=? AND "
                        "head IS ?", (ref.head, ref.updated_at, ref.memory_id, ref.name,
                                      expected))
        if moved:
            return
        current = self.ref(ref.memory_id, ref.name)
        if current is None and expected is None:
            self._x("INSERT INTO refs VALUES (?,?,?,?,?,?,?)",
                    (ref.memory_id, ref.name, ref.head, int(ref.protected), ref.created_by,
                     ref.created_at, ref.updated_at))
            return
        held = current.head if current is not None else None
        raise Conflict(f"{ref.name} moved: expected head {expected or 'none'}, current head "
                       f"{held or 'none'}", code=CAS_MISMATCH,
                       hint="re-read the ref and resubmit with a new idempotency key")

    def lock_memory(self, memory_id: str) -> None:
        """Serialise the writers of one memory until the write transaction ends. SQLite's
        ``BEGIN IMMEDIATE`` already serialises every writer of the file, so there is nothing
        more to take here; a server database takes a transaction-scoped advisory lock."""

    def compact_after_erase(self) -> None:
        """Make erased bytes unrecoverable from the files: FTS5 keeps deleted terms in old
        index segments until they merge, and the WAL keeps old page images until a
        checkpoint. Rewrites the index (cost grows with its size; erase is rare)."""
        with self.write():
            self._x("INSERT INTO record_fts(record_fts) VALUES ('optimize')")
        with self.lock:
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def forget_responses(self, record_id: str) -> None:
        """Drop stored idempotent responses that name an erased record, whatever the route
        (a UHP write, a Memory Git commit or merge): they may carry its content."""
        self._x("DELETE FROM idempotency WHERE instr(response, ?) > 0", (record_id.encode(),))

    # --- migration (pal admin migrate) ---------------------------------------------------------
    _IMPORTABLE: Final = frozenset({"members", "groups", "memberships", "credentials",
                                    "memories", "grants", "files", "mg_nonces", "mg_settings",
                                    "docs", "mg_reviews", "mg_advances", "mg_manifests",
                                    "mg_conflicts", "sessions"})

    def import_rows(self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]
                    ) -> None:
        """Carry rows of an older store over as they are (migration only)."""
        if table not in self._IMPORTABLE or not all(c.isidentifier() for c in columns):
            raise ValueError(f"not an importable table: {table}")
        if not rows:
            return
        sql = (f"INSERT INTO {table} ({', '.join(columns)}) "  # noqa: S608 — allowlisted
               f"VALUES ({', '.join('?' * len(columns))})")
        self._db.executemany(sql, [tuple(r) for r in rows])
        if table == "memories":
            for r in self._q("SELECT id FROM memories"):
                self._key(r["id"])

    def import_document(self, table: str, columns: Sequence[str], values: Sequence[Any],
                        doc: Any) -> None:
        """One JSON document row of an older store, its document rewritten (migration only)."""
        text = canonical.encode(doc) if table == "docs" else canonical.encode(doc).decode()
        self.import_rows(table, [*columns, "doc"], [[*values, text]])

    def import_proposal(self, doc: Any, seq: int) -> None:
        """A proposal of an older store (migration only); review sequence numbers continue
        after the highest imported."""
        self._x("INSERT INTO mg_proposals VALUES (?,?,?,?,?,?)",
                (doc["proposal_id"], doc["project_id"], doc["originator_principal"],
                 doc["status"], canonical.encode(doc).decode("utf-8"), seq))
        for table in ("mg_proposals", "mg_reviews", "mg_advances", "mg_conflicts"):
            self._x(f"UPDATE mg_seq SET value = MAX(value, (SELECT COALESCE(MAX(seq), 0) "  # noqa: S608
                    f"FROM {table})) WHERE id = 1")

    def import_ref(self, ref: Ref) -> None:
        """A ref of an older store, its head already rewritten (migration only)."""
        self._x("INSERT INTO refs VALUES (?,?,?,?,?,?,?)",
                (ref.memory_id, ref.name, ref.head, int(ref.protected), ref.created_by,
                 ref.created_at, ref.updated_at))

    def counts(self) -> dict[str, int]:
        """Row counts reported by a rebuild (``versions``: every version, current or not)."""
        out = {}
        for table in ("changesets", "records", "versions", "record_fts"):
            r = self._one(f"SELECT COUNT(*) AS c FROM {table}")  # noqa: S608
            out[table] = int(r["c"]) if r else 0
        out["versions"] += out["records"]
        out["indexed"] = out.pop("record_fts")
        return out


def _hex(value: Any) -> str:
    return bytes(value).hex() if isinstance(value, bytes) else str(value)


def _digest_text(value: Any) -> str:
    """A request digest as stored (32 bytes, or the empty name a migration keeps)."""
    raw = value.encode("utf-8") if isinstance(value, str) else bytes(value)
    return raw.hex() if len(raw) == 32 else raw.decode("utf-8", "replace")


__all__ = ["Hit", "SqliteStore", "hash_secret", "load"]
