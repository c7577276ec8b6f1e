"""The server store: the memory service on PostgreSQL, several processes over one database.

The same rows as the embedded store, written by the same statements (:class:`..tree.SqlRows`
and its bases, through :mod:`.dialect`); this class holds what a server database does its
own way:

- **Transactions** take a connection from a pool (psycopg 3; a broken one is replaced when
  it comes back) for their length: ``write`` is
  ``BEGIN`` (read committed), ``read`` a repeatable-read, read-only snapshot. Statements
  outside a transaction borrow a connection in autocommit. A lost connection is
  ``memory_unavailable``; nothing of the transaction stays.
- **A memory's writers are serialised** by ``pg_advisory_xact_lock`` on the memory
  (:meth:`lock_memory`), released with the transaction, in whichever process holds it.
- **Refs move by compare-and-swap in the statement** (``UPDATE … WHERE head IS NOT DISTINCT
  FROM expected``; a concurrent updater waits for the row and re-checks); a first head is
  created by the unique key. **Idempotency keys** and **merge nonces** are decided by their
  unique keys in the same transaction (``ON CONFLICT DO NOTHING`` and a count, so a second
  first use is a conflict, never an aborted transaction).
- **Generations** (principals, tree, erase) live in ``meta`` and triggers bump them, so every
  process sees a credential or grant change on its next read.
- **Search** is :class:`.search.SearchRows`: the analyser's own tokens under a GIN index, ranked
  by the project's BM25 (:mod:`palimpsest.search.bm25`) from statistics kept in the write.

Only keys and file bytes stay in the data directory (``files/``, as the embedded store keeps
them).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

import psycopg
import psycopg.errors
from psycopg_pool import ConnectionPool, PoolTimeout

from palimpsest import canonical
from palimpsest.errors import Conflict
from palimpsest.service.model import store_busy, unavailable
from palimpsest.service.storage.changesets import digest_key
from palimpsest.service.storage.files import private_dir
from palimpsest.service.storage.memorygit import GitStore
from palimpsest.service.storage.postgres import schema
from palimpsest.service.storage.postgres.dialect import PgConnection, row_factory
from palimpsest.service.storage.postgres.search import SearchRows
from palimpsest.service.storage.protocol import WRITE_WAIT_SECONDS
from palimpsest.service.storage.tree import StoreVersionError

# pg_advisory_xact_lock(class, key): the class names this service's memory locks.
MEMORY_LOCK_CLASS: Final = 0x70616C  # "pal"
POOL_TIMEOUT: Final = 30.0  # seconds a transaction waits for a pooled connection


def redacted(url: str) -> str:
    """A connection string without its password (for messages and logs)."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "the configured database"
    where = f"{info.get('host', 'localhost')}:{info.get('port', 5432)}"
    return f"postgresql://{info.get('user', '')}@{where}/{info.get('dbname', '')}"


def _pool(url: str, size: int) -> ConnectionPool[Any]:
    # No check on checkout (it would cost a round trip per transaction): a connection the
    # server dropped fails its transaction as memory_unavailable, goes back broken, and the
    # pool replaces it.
    return ConnectionPool(url, min_size=1, max_size=size, open=True, timeout=POOL_TIMEOUT,
                          name="palimpsest",
                          kwargs={"autocommit": True, "row_factory": row_factory,
                                  "cursor_factory": psycopg.ClientCursor,
                                  "prepare_threshold": None})


def migrate_schema(url: str) -> tuple[int, int]:
    """Bring the database at ``url`` to this version's schema; ``(found, now)``.

    Raises:
        Unavailable: the database cannot be reached, or holds a newer schema.
    """
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
            return schema.migrate(conn)
    except ValueError as exc:
        raise StoreVersionError(str(exc), hint="run a palimpsest version that knows this "
                          "schema") from exc
    except psycopg.Error as exc:
        raise unavailable(f"cannot migrate {redacted(url)}: {exc}") from exc


# another process's writer held what this write needs past its wait: busy, retry
_BUSY: Final = (psycopg.errors.LockNotAvailable, psycopg.errors.DeadlockDetected)


class PostgresStore(SearchRows):
    """The store over one PostgreSQL database, file bytes in ``data_dir/files``."""

    _db: PgConnection

    def __init__(self, data_dir: Path, url: str, *, pool_size: int = 4,
                 write_wait: float = WRITE_WAIT_SECONDS) -> None:
        try:
            private_dir(data_dir)
            private_dir(data_dir / "files")
        except OSError as exc:
            raise unavailable(f"cannot open the data directory {data_dir}: {exc}") from exc
        self.data_dir = data_dir
        self.url = url
        self._check_schema(url)
        try:
            self._pool = _pool(url, pool_size)
            self._pool.wait(timeout=POOL_TIMEOUT)
        except (psycopg.Error, PoolTimeout) as exc:
            raise unavailable(f"cannot connect to {redacted(url)}: {exc}") from exc
        self._db = PgConnection(self._pool)
        self._init_state(write_wait)
        self._pg_peek: psycopg.Connection[Any] | None = None
        self._pg_peek_lock = threading.Lock()

    @staticmethod
    def _check_schema(url: str) -> None:
        """Create the schema in an empty database; refuse any version but this one's."""
        try:
            with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
                found = schema.found_version(conn)
                if found == 0:
                    schema.migrate(conn)
                    return
        except psycopg.Error as exc:
            raise unavailable(f"cannot connect to {redacted(url)}: {exc}") from exc
        if found > schema.SCHEMA_VERSION:
            raise StoreVersionError(
                f"{redacted(url)} has schema {found}; this version reads schema "
                f"{schema.SCHEMA_VERSION}", hint="run the palimpsest version that wrote it, "
                "or a newer one")
        if found < schema.SCHEMA_VERSION:
            raise StoreVersionError(
                f"{redacted(url)} has schema {found}; this version reads schema "
                f"{schema.SCHEMA_VERSION}", hint="bring it up to date with: pal admin "
                "migrate-schema --database <url>")

    def close(self) -> None:
        """Close the pool (idempotent)."""
        with self.lock:
            self._pool.close()
        with self._pg_peek_lock, contextlib.suppress(psycopg.Error):
            if self._pg_peek is not None:
                self._pg_peek.close()

    # --- transactions ---------------------------------------------------------------------
    def _begun(self, begin: str) -> psycopg.Connection[Any]:
        """A pooled connection with ``begin`` run on it. A connection the server dropped (a
        restart) fails at ``BEGIN``, before anything is done: it goes back to the pool, which
        replaces it, and the next one is tried (as many times as the pool holds)."""
        for _ in range(self._pool.max_size + 1):
            try:
                conn: psycopg.Connection[Any] = self._pool.getconn()
            except (PoolTimeout, psycopg.Error) as exc:
                raise unavailable(f"the database is unreachable: {exc}") from exc
            try:
                conn.execute(begin)
                return conn
            except psycopg.OperationalError as exc:
                self._pool.putconn(conn)
                failure = exc
        raise unavailable(f"the database is unreachable: {failure}") from failure

    @contextmanager
    def _transaction(self, begin: str, what: str) -> Iterator[None]:
        conn = self._begun(begin)
        committed = False
        try:
            if what == "write":
                # A writer waits for another process's writer of the same memory (its
                # advisory lock) or rows at most write_wait, then is refused as busy.
                conn.execute(f"SET LOCAL lock_timeout = {int(self._write_wait * 1000)}")
            self._db.bind(conn)
            self._in_tx = True
            try:
                yield
            except psycopg.Error as exc:
                with contextlib.suppress(psycopg.Error):
                    conn.execute("ROLLBACK")
                if isinstance(exc, _BUSY):
                    raise store_busy(self._write_wait) from exc
                raise unavailable(f"the database could not complete the {what}: "
                                  f"{exc}") from exc
            except BaseException:
                with contextlib.suppress(psycopg.Error):
                    conn.execute("ROLLBACK")
                raise
            try:
                conn.execute("COMMIT")
                committed = True
            except psycopg.Error as exc:
                raise unavailable(f"the database could not commit: {exc}") from exc
        finally:
            self._in_tx = False
            self._db.bind(None)
            self._settle_names(committed)
            self._settle_seqs(committed)
            self._pool.putconn(conn)

    @contextmanager
    def write(self) -> Iterator[None]:
        """One read-committed transaction: all of it commits, or none of it."""
        with self.lock:
            if self._in_tx:
                yield
                return
            with self._transaction("BEGIN", "write"):
                yield

    @contextmanager
    def read(self) -> Iterator[None]:
        """One snapshot for everything read inside it."""
        with self.lock:
            if self._in_tx:
                yield
                return
            with self._transaction("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", "read"):
                yield

    def changes(self) -> int:
        """Rows inserted, updated or deleted through this store so far."""
        return int(self._db.changes)

    def review_store(self) -> GitStore:
        """Memory Git's review tables over this store, in the same transactions (made once)."""
        if self._review is None:
            self._review = GitStore(self)
        return self._review

    def connection(self) -> PgConnection:
        """The statements' connection, for Memory Git's review tables (inside ``write`` /
        ``read``)."""
        return self._db

    def lock_memory(self, memory_id: str) -> None:
        """Serialise the writers of one memory, in every process, until the transaction
        ends (a transaction-scoped advisory lock)."""
        self._db.execute("SELECT pg_advisory_xact_lock(?, hashtext(?))",
                         (MEMORY_LOCK_CLASS, memory_id))

    # --- the principals generation, read beside the service thread ------------------------
    def peek_principals_generation(self) -> int | None:
        """The principals generation on a connection of its own, never waiting for the store
        lock; ``None`` when it cannot be read at once (the caller takes the ordinary path)."""
        if not self._pg_peek_lock.acquire(blocking=False):
            return None
        try:
            if self._pg_peek is None or self._pg_peek.closed:
                self._pg_peek = psycopg.connect(self.url, autocommit=True, connect_timeout=2)
            row = self._pg_peek.execute(
                "SELECT value FROM meta WHERE key = 'principals_gen'").fetchone()
            return int(row[0]) if row is not None else None
        except psycopg.Error:
            if self._pg_peek is not None:
                with contextlib.suppress(psycopg.Error):
                    self._pg_peek.close()
                self._pg_peek = None
            return None
        finally:
            self._pg_peek_lock.release()

    # --- what PostgreSQL says its own way -------------------------------------------------
    def _key(self, name: str) -> int:
        """The key of ``name``, made when it has none; two processes making the same name's
        key meet on its unique name (the second reads the first's)."""
        k = self._keys.get(name) or self._pending.get(name)
        if k is not None:
            return k
        made = self._db.execute("INSERT OR IGNORE INTO names (name) VALUES (?)",
                                (name,)).lastrowid
        if made is not None:
            self._pending[name] = made
            return made
        row = self._one("SELECT k FROM names WHERE name=?", (name,))
        if row is None:
            raise unavailable(f"the store lost the names key of {name!r}")
        self._keys[name] = int(row["k"])
        return int(row["k"])

    def remember_response(self, principal: str, scope: str, key: str, digest: str,  # noqa: PLR0917 — the protocol's signature
                          response: Any, now: int) -> None:
        """Store the response of a first request under its key; the unique key decides
        between two first uses (in any process)."""
        if not self._x("INSERT OR IGNORE INTO idempotency VALUES (?,?,?,?,?,?)",
                       (self._key(scope), self._key(principal), key,
                        digest_key(digest) or digest.encode(), canonical.encode(response),
                        now)):
            raise Conflict("a concurrent request used this idempotency key",
                           code="idempotency_race", hint="retry to read the winner")

    def compact_after_erase(self) -> None:
        """Make erased bytes unreachable in the files: rewrite the tables that held them
        (``VACUUM FULL``: dead row versions keep old bytes until then). Inside an open
        transaction it cannot run (it would wait for that transaction's own locks): it is
        left to the next erase or to autovacuum."""
        if self._in_tx:
            return
        with self.lock, self._pool.connection() as conn:
            conn.execute("VACUUM FULL bodies, records, versions, record_fts, fts_terms, "
                         "idempotency, docs")

    def clear_projections(self) -> None:
        """Drop every projection (records, versions, index, statistics) before a rebuild."""
        self._x("TRUNCATE records, versions, record_fts, record_terms, fts_terms, edges, "
                "memory_counts")

    def import_proposal(self, doc: Any, seq: int) -> None:
        """A proposal of an older store (migration only); review sequence numbers continue
        after the highest imported."""
        self._x("INSERT INTO mg_proposals VALUES (?,?,?,?,?,?)",
                (doc["proposal_id"], doc["project_id"], doc["originator_principal"],
                 doc["status"], canonical.encode(doc).decode("utf-8"), seq))
        for table in ("mg_proposals", "mg_reviews", "mg_advances", "mg_conflicts"):
            self._x(f"UPDATE mg_seq SET value = GREATEST(value, (SELECT COALESCE(MAX(seq), 0) "  # noqa: S608 — fixed names
                    f"FROM {table})) WHERE id = 1")


__all__ = ["PostgresStore", "StoreVersionError", "migrate_schema", "redacted"]
