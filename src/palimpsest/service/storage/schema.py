"""The SQL schema of the embedded store and the small helpers that turn rows into core values.

Kept apart from :mod:`palimpsest.service.storage.sqlite` (the queries) so each stays readable;
this is still part of the one package that speaks SQL.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Final, Protocol

from palimpsest.search.fts import CONTEXT_WEIGHT, FTS5_TOKENIZE
from palimpsest.service.model import ALL_PRIVILEGES, PRIVILEGES, Grant, Member, Memory, unavailable
from palimpsest.service.storage.protocol import hash_secret
from palimpsest.service.storage.rows import Hit

# 2: one history — record bodies and Memory Git payloads content-addressed in ``bodies`` (no
# salt), Memory Git payloads kept apart from changesets, one idempotency table.
# 3: the same history in less space — documents and bodies deflated (:mod:`.pack`), digests as
# 32-byte blobs, memory ids and principals as integer keys (``names``), a record's current
# version in its ``records`` row (``versions`` holds the superseded ones), parents named by
# their row. (Signatures on changesets and members' public keys are tables of their own,
# added to a store of schema 3 when it is opened: nothing older changes.)
SCHEMA_VERSION: Final = 3
# BM25 column weights: a record's own words, then its context (for an episode, the words of
# the episode written just before it in the same memory: in a conversation the answer is often
# the turn after the one that repeats the question).
RANK: Final = f"bm25(1.0, {CONTEXT_WEIGHT})"
BM25: Final = f"bm25(record_fts, 1.0, {CONTEXT_WEIGHT})"

# Any change to who a credential stands for — by this process, another (`pal admin`), or a hand
# edit of the database — bumps meta.principals_gen in the same transaction, so a cache of
# authenticated credentials can tell in one read whether it may still be trusted.
PRINCIPAL_TABLES: Final = ("members", "groups", "memberships", "credentials")
PRINCIPAL_TRIGGERS: Final = "".join(
    f"CREATE TRIGGER IF NOT EXISTS principals_gen_{table}_{event.lower()} AFTER {event} ON "  # noqa: S608 — fixed names
    f"{table} BEGIN UPDATE meta SET value = CAST(value AS INTEGER) + 1 "
    f"WHERE key='principals_gen'; END;\n"
    for table in PRINCIPAL_TABLES for event in ("INSERT", "UPDATE", "DELETE"))

# A memory's BM25 statistics (indexed records, their analysed length over both columns, every
# status and type: what FTS5 itself counts) follow its ``records`` rows in the same
# transaction, whichever write moves them, so a recall ranks with its reach's statistics
# without counting them (:meth:`RecordRows.statistics`). Created after the tables because a
# store of schema 3 written before ``records.terms`` existed gains that column first.
TERMS_TRIGGERS: Final = """
CREATE TRIGGER IF NOT EXISTS record_terms_insert AFTER INSERT ON records BEGIN
  INSERT INTO record_terms VALUES (NEW.mem, 1, NEW.terms) ON CONFLICT(mem) DO UPDATE
  SET docs = docs + 1, length = length + excluded.length; END;
CREATE TRIGGER IF NOT EXISTS record_terms_delete AFTER DELETE ON records BEGIN
  UPDATE record_terms SET docs = docs - 1, length = length - OLD.terms WHERE mem = OLD.mem; END;
CREATE TRIGGER IF NOT EXISTS record_terms_update AFTER UPDATE OF mem, terms ON records BEGIN
  UPDATE record_terms SET docs = docs - 1, length = length - OLD.terms WHERE mem = OLD.mem;
  INSERT INTO record_terms VALUES (NEW.mem, 1, NEW.terms) ON CONFLICT(mem) DO UPDATE
  SET docs = docs + 1, length = length + excluded.length; END;
"""

SCHEMA: Final = f"""
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS members (id TEXT PRIMARY KEY, name TEXT NOT NULL, type TEXT NOT NULL,
  admin INTEGER NOT NULL, created_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS groups (id TEXT PRIMARY KEY, name TEXT NOT NULL,
  created_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS memberships (group_id TEXT NOT NULL, member_id TEXT NOT NULL,
  PRIMARY KEY (group_id, member_id));
CREATE INDEX IF NOT EXISTS memberships_member ON memberships(member_id);
CREATE TABLE IF NOT EXISTS credentials (id TEXT PRIMARY KEY, member_id TEXT NOT NULL,
  secret_hash TEXT NOT NULL, label TEXT NOT NULL, created_at INTEGER NOT NULL,
  revoked INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS memories (id TEXT PRIMARY KEY, name TEXT NOT NULL,
  description TEXT NOT NULL, parent_id TEXT, restricted INTEGER NOT NULL, provider TEXT NOT NULL,
  created_by TEXT NOT NULL, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS grants (id TEXT PRIMARY KEY, memory_id TEXT NOT NULL,
  principal TEXT NOT NULL, privileges TEXT NOT NULL, created_at INTEGER NOT NULL,
  UNIQUE (memory_id, principal));
CREATE TABLE IF NOT EXISTS names (k INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS changesets (seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id BLOB NOT NULL UNIQUE, mem INTEGER NOT NULL, doc BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS signatures (cs INTEGER NOT NULL, key BLOB NOT NULL,
  role TEXT NOT NULL, signer INTEGER NOT NULL, sig BLOB NOT NULL, PRIMARY KEY (cs, key))
  WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS member_keys (key BLOB PRIMARY KEY, member_id TEXT NOT NULL,
  created_at INTEGER NOT NULL, revoked INTEGER NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS member_keys_member ON member_keys(member_id);
CREATE TABLE IF NOT EXISTS refs (memory_id TEXT NOT NULL, name TEXT NOT NULL, head TEXT,
  protected INTEGER NOT NULL, created_by TEXT NOT NULL, created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL, PRIMARY KEY (memory_id, name));
CREATE TABLE IF NOT EXISTS bodies (digest BLOB PRIMARY KEY, data BLOB NOT NULL, bases BLOB)
  WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS bodies_delta ON bodies(digest) WHERE bases IS NOT NULL;
CREATE TABLE IF NOT EXISTS records (n INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE,
  mem INTEGER NOT NULL, type TEXT NOT NULL, version INTEGER NOT NULL, status TEXT NOT NULL,
  written_at TEXT NOT NULL, body BLOB NOT NULL, writer INTEGER NOT NULL, cs INTEGER NOT NULL,
  extra TEXT, forgotten_at TEXT, standing INTEGER NOT NULL DEFAULT 0, context_src TEXT,
  thread TEXT, when_at TEXT, terms INTEGER NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS records_list ON records(mem, status, n);
CREATE INDEX IF NOT EXISTS records_type ON records(mem, type, n);
CREATE INDEX IF NOT EXISTS records_standing ON records(mem, status) WHERE standing = 1;
CREATE TABLE IF NOT EXISTS versions (n INTEGER NOT NULL, version INTEGER NOT NULL,
  body BLOB NOT NULL, written_at TEXT NOT NULL, invalidated_at TEXT NOT NULL,
  forgotten_at TEXT, writer INTEGER NOT NULL, cs INTEGER NOT NULL, extra TEXT,
  PRIMARY KEY (n, version)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS edges (src TEXT NOT NULL, dst TEXT NOT NULL, rel TEXT NOT NULL,
  memory_id TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS edges_src ON edges(src);
CREATE INDEX IF NOT EXISTS edges_dst ON edges(dst);
CREATE VIRTUAL TABLE IF NOT EXISTS record_fts USING fts5(text, context,
  tokenize='{FTS5_TOKENIZE}');
CREATE VIRTUAL TABLE IF NOT EXISTS record_vocab USING fts5vocab(record_fts, 'row');
CREATE TABLE IF NOT EXISTS record_terms (mem INTEGER PRIMARY KEY, docs INTEGER NOT NULL,
  length INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS memory_counts (memory_id TEXT PRIMARY KEY,
  active INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS files (id TEXT PRIMARY KEY, sha256 TEXT NOT NULL, name TEXT NOT NULL,
  media_type TEXT NOT NULL, bytes INTEGER NOT NULL, created_by TEXT NOT NULL,
  created_at INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS files_sha ON files(sha256);
CREATE TABLE IF NOT EXISTS idempotency (scope INTEGER NOT NULL, principal INTEGER NOT NULL,
  key TEXT NOT NULL, digest BLOB NOT NULL, response BLOB NOT NULL, created_at INTEGER NOT NULL,
  PRIMARY KEY (scope, principal, key)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS docs (kind TEXT NOT NULL, id TEXT NOT NULL, memory_id TEXT,
  created_at INTEGER NOT NULL, doc BLOB NOT NULL, PRIMARY KEY (kind, id));
CREATE INDEX IF NOT EXISTS docs_memory ON docs(kind, memory_id, created_at);
CREATE TABLE IF NOT EXISTS sessions (key TEXT PRIMARY KEY, member_id TEXT NOT NULL,
  credential_id TEXT NOT NULL, csrf TEXT NOT NULL, created_at INTEGER NOT NULL,
  idle_until INTEGER NOT NULL, expires_at INTEGER NOT NULL) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS sessions_member ON sessions(member_id, created_at);
{PRINCIPAL_TRIGGERS}"""


def load(data: bytes | str) -> Any:
    """Parse JSON this service wrote itself with :func:`canonical.encode`.

    The strict decoder guards untrusted input; these bytes never came from a client directly
    (bodies were validated before they were encoded), and recall reads many of them.
    """
    return json.loads(data)


def priv_text(privs: Iterable[str]) -> str:
    s = set(privs)
    return ",".join(p for p in PRIVILEGES if p in s)


def privs(text: str) -> frozenset[str]:
    return frozenset(p for p in text.split(",") if p in ALL_PRIVILEGES)


class Cursor(Protocol):
    """What the row helpers read of an executed statement (a :class:`sqlite3.Cursor`, or the
    PostgreSQL store's materialised result)."""

    @property
    def rowcount(self) -> int:
        """Rows the statement inserted, updated or deleted."""

    @property
    def lastrowid(self) -> int | None:
        """The key of the row an ``INSERT`` made."""

    def fetchone(self) -> Any:
        """The next row (by column name or position), ``None`` past the last."""

    def fetchall(self) -> list[Any]:
        """Every remaining row."""

    def __iter__(self) -> Iterator[Any]:
        """The remaining rows."""


class Connection(Protocol):
    """What the row helpers run statements on: a :class:`sqlite3.Connection`, or the
    PostgreSQL store's connection (which takes the same statements, see
    :mod:`.postgres.dialect`)."""

    def execute(self, sql: str, parameters: Any = (), /) -> Cursor:
        """Run one statement with ``?`` placeholders."""

    def executemany(self, sql: str, parameters: Any, /) -> Cursor:
        """Run one statement once per row of parameters."""


def memory_of(row: Any) -> Memory:
    return Memory(row["id"], row["name"], row["description"], row["parent_id"],
                  bool(row["restricted"]), row["provider"], row["created_by"],
                  row["created_at"], row["updated_at"])


def member_of(row: Any) -> Member:
    return Member(row["id"], row["name"], row["type"], bool(row["admin"]), row["created_at"])


def grant_of(row: Any) -> Grant:
    return Grant(row["id"], row["memory_id"], row["principal"], privs(row["privileges"]),
                 row["created_at"])


class Statements:
    """The three statement shapes every row helper of the store uses, over ``_db``."""

    _db: Connection

    def _q(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        return self._db.execute(sql, args).fetchall()

    def _one(self, sql: str, args: Sequence[Any] = ()) -> Any:
        return self._db.execute(sql, args).fetchone()

    def _x(self, sql: str, args: Sequence[Any] = ()) -> int:
        return self._db.execute(sql, args).rowcount


class Names(Statements):
    """Integer keys for the strings every row would otherwise repeat (memory ids, principals,
    ``written_by``): ``names`` maps each to a key once, for ever (a key is never reused or
    changed, so a cache of committed keys never goes stale, in this process or another).
    A key made inside a write joins the cache only when that write commits."""

    _keys: dict[str, int]
    _names: dict[int, str]
    _pending: dict[str, int]

    def _key(self, name: str) -> int:
        """The key of ``name``, made when it has none (inside a write)."""
        k = self._keys.get(name) or self._pending.get(name)
        if k is not None:
            return k
        row = self._one("SELECT k FROM names WHERE name=?", (name,))
        if row is not None:
            self._keys[name] = int(row["k"])
            return int(row["k"])
        made = int(self._db.execute("INSERT INTO names (name) VALUES (?)",
                                    (name,)).lastrowid or 0)
        self._pending[name] = made
        return made

    def _known(self, name: str) -> int | None:
        """The key of ``name`` if it has one (reads never make keys)."""
        k = self._keys.get(name) or self._pending.get(name)
        if k is not None:
            return k
        row = self._one("SELECT k FROM names WHERE name=?", (name,))
        if row is None:
            return None
        self._keys[name] = int(row["k"])
        return int(row["k"])

    def _name(self, k: int) -> str:
        """The string a key stands for."""
        name = self._names.get(k)
        if name is None:
            row = self._one("SELECT name FROM names WHERE k=?", (k,))
            if row is None:
                raise unavailable(f"the store is damaged: names has no key {k}")
            name = str(row["name"])
            if k not in self._pending.values():
                self._names[k] = name
        return name

    def _settle_names(self, committed: bool) -> None:
        """After a write: keep the keys it made (committed) or forget them (rolled back)."""
        if committed:
            self._keys.update(self._pending)
        self._pending.clear()


__all__ = [
    "BM25",
    "RANK",
    "SCHEMA",
    "SCHEMA_VERSION",
    "TERMS_TRIGGERS",
    "Connection",
    "Cursor",
    "Hit",
    "Names",
    "Statements",
    "grant_of",
    "hash_secret",
    "load",
    "member_of",
    "memory_of",
    "priv_text",
    "privs",
]
