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
import random
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

from palimpsest import canonical
from palimpsest.errors import Conflict, Unavailable
from palimpsest.service.model import store_busy, unavailable
from palimpsest.service.storage.audit import AUDIT_SCHEMA
from palimpsest.service.storage.changesets import digest_key
from palimpsest.service.storage.files import private_dir, private_file
from palimpsest.service.storage.memorygit import GitStore
from palimpsest.service.storage.protocol import WRITE_WAIT_SECONDS
from palimpsest.service.storage.schema import (
    RANK,
    SCHEMA,
    SCHEMA_VERSION,
    TERMS_TRIGGERS,
    Hit,
    hash_secret,
    load,
)
from palimpsest.service.storage.tree import SqlRows, StoreVersionError

MMAP_SIZE: Final = 1 << 34  # SQLite clamps it to its compiled maximum
_FIRST_PAUSE: Final = 0.0005
_MAX_PAUSE: Final = 0.004


class SqliteStore(SqlRows):
    """One SQLite database plus a ``files/`` directory of content-addressed bytes."""

    def __init__(self, data_dir: Path, *, durability: str = "normal",
                 write_wait: float = WRITE_WAIT_SECONDS) -> None:
        try:
            private_dir(data_dir)  # 0700 / 0600 whatever the umask: no other user reads memory
            private_dir(data_dir / "files")
            for name in ("palimpsest.db", "palimpsest.db-wal", "palimpsest.db-shm"):
                if name == "palimpsest.db" or (data_dir / name).exists():
                    private_file(data_dir / name)
            self.data_dir = data_dir
            # Readers of a WAL database never wait for writers; the bounded wait covers the
            # rare moments a reader does (WAL recovery after a crashed process).
            self._db: sqlite3.Connection = sqlite3.connect(
                data_dir / "palimpsest.db", isolation_level=None, check_same_thread=False,
                timeout=write_wait)
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
            self._db.executescript(AUDIT_SCHEMA)  # added to older stores of schema 3 on open
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
        self._init_state(write_wait)
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
            self._begin_write()
            self._in_tx = True
            committed = False
            try:
                yield
            except sqlite3.Error as exc:
                # Disk full, I/O error, lock lost: nothing of this write stays, and the edge
                # sees memory_unavailable rather than an unexplained failure.
                with contextlib.suppress(sqlite3.Error):
                    self._db.execute("ROLLBACK")
                raise self._failure("could not complete the write", exc) from exc
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
                    raise self._failure("could not commit", exc) from exc
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
                raise self._failure("could not complete the read", exc) from exc
            finally:
                self._in_tx = False
                self._db.execute("COMMIT")

    def _begin_write(self) -> None:
        """``BEGIN IMMEDIATE``: take the one write lock of the file, waiting for the writers
        of other processes at most ``write_wait`` seconds, then refuse with a busy 503.

        The wait is this loop's, not SQLite's busy handler (whose sleeps grow to 100 ms, so a
        waiter keeps sleeping long after the lock came free): short, jittered pauses, so the
        lock passes between processes within a millisecond or two."""
        start = time.monotonic()
        pause = _FIRST_PAUSE
        self._db.execute("PRAGMA busy_timeout=0")
        try:
            while True:
                try:
                    self._db.execute("BEGIN IMMEDIATE")
                    return
                except sqlite3.OperationalError as exc:
                    left = self._write_wait - (time.monotonic() - start)
                    if not _is_busy(exc):
                        raise self._failure("could not start the write", exc) from exc
                    if left <= 0:
                        raise store_busy(self._write_wait) from exc
                    time.sleep(min(left, pause * (0.5 + random.random())))  # noqa: S311
                    pause = min(pause * 2, _MAX_PAUSE)
        finally:
            self._db.execute(f"PRAGMA busy_timeout={int(self._write_wait * 1000)}")

    def _failure(self, what: str, exc: sqlite3.Error) -> Unavailable:
        """The refusal for a failed statement, in the service's words: another process
        holding the file past the wait is "busy, retry" (never SQLite's own wording)."""
        if _is_busy(exc):
            return store_busy(self._write_wait)
        return unavailable(f"the store {what}: {exc}")

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

    # --- idempotency ----------------------------------------------------------------------
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

    # --- migration (pal admin migrate) ---------------------------------------------------------
    def import_proposal(self, doc: Any, seq: int) -> None:
        """A proposal of an older store (migration only); review sequence numbers continue
        after the highest imported."""
        self._x("INSERT INTO mg_proposals VALUES (?,?,?,?,?,?)",
                (doc["proposal_id"], doc["project_id"], doc["originator_principal"],
                 doc["status"], canonical.encode(doc).decode("utf-8"), seq))
        for table in ("mg_proposals", "mg_reviews", "mg_advances", "mg_conflicts"):
            self._x(f"UPDATE mg_seq SET value = MAX(value, (SELECT COALESCE(MAX(seq), 0) "  # noqa: S608
                    f"FROM {table})) WHERE id = 1")

def _is_busy(exc: sqlite3.Error) -> bool:
    """SQLITE_BUSY or SQLITE_LOCKED (any extended code): another connection holds the lock."""
    code = getattr(exc, "sqlite_errorcode", None)
    return isinstance(code, int) and code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)



__all__ = ["Hit", "SqliteStore", "StoreVersionError", "hash_secret", "load"]
