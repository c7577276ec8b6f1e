"""The SQL schema of the embedded store and the small helpers that turn rows into core values.

Kept apart from :mod:`palimpsest.service.storage.sqlite` (the queries) so each stays readable;
this is still part of the one package that speaks SQL.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any, Final

from palimpsest.search.fts import CONTEXT_WEIGHT, FTS5_TOKENIZE
from palimpsest.service.model import ALL_PRIVILEGES, PRIVILEGES, Grant, Member, Memory
from palimpsest.service.storage.rows import Hit

# 2: one history — record bodies and Memory Git payloads content-addressed in ``bodies`` (no
# salt), Memory Git payloads kept apart from changesets, one idempotency table.
SCHEMA_VERSION: Final = 2
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
CREATE TABLE IF NOT EXISTS changesets (seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE, memory_id TEXT NOT NULL, doc BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS changesets_memory ON changesets(memory_id, seq);
CREATE TABLE IF NOT EXISTS refs (memory_id TEXT NOT NULL, name TEXT NOT NULL, head TEXT,
  protected INTEGER NOT NULL, created_by TEXT NOT NULL, created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL, PRIMARY KEY (memory_id, name));
CREATE TABLE IF NOT EXISTS bodies (digest TEXT PRIMARY KEY, data BLOB NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS records (n INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE,
  memory_id TEXT NOT NULL, type TEXT NOT NULL, version INTEGER NOT NULL, status TEXT NOT NULL,
  written_at TEXT NOT NULL, body_digest TEXT NOT NULL, standing INTEGER NOT NULL DEFAULT 0,
  context_src TEXT, thread TEXT, when_at TEXT);
CREATE INDEX IF NOT EXISTS records_list ON records(memory_id, status, n);
CREATE INDEX IF NOT EXISTS records_type ON records(memory_id, type, n);
CREATE INDEX IF NOT EXISTS records_standing ON records(memory_id, status) WHERE standing = 1;
CREATE TABLE IF NOT EXISTS versions (record_id TEXT NOT NULL, version INTEGER NOT NULL,
  memory_id TEXT NOT NULL, body_digest TEXT NOT NULL, written_at TEXT NOT NULL,
  invalidated_at TEXT, forgotten_at TEXT, written_by TEXT NOT NULL, extra TEXT NOT NULL,
  changeset_id TEXT NOT NULL, PRIMARY KEY (record_id, version)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS versions_memory ON versions(memory_id, written_at);
CREATE TABLE IF NOT EXISTS edges (src TEXT NOT NULL, dst TEXT NOT NULL, rel TEXT NOT NULL,
  memory_id TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS edges_src ON edges(src);
CREATE INDEX IF NOT EXISTS edges_dst ON edges(dst);
CREATE VIRTUAL TABLE IF NOT EXISTS record_fts USING fts5(text, context,
  tokenize='{FTS5_TOKENIZE}');
CREATE VIRTUAL TABLE IF NOT EXISTS record_vocab USING fts5vocab(record_fts, 'row');
CREATE TABLE IF NOT EXISTS memory_counts (memory_id TEXT PRIMARY KEY,
  active INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS files (id TEXT PRIMARY KEY, sha256 TEXT NOT NULL, name TEXT NOT NULL,
  media_type TEXT NOT NULL, bytes INTEGER NOT NULL, created_by TEXT NOT NULL,
  created_at INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS files_sha ON files(sha256);
CREATE TABLE IF NOT EXISTS idempotency (principal TEXT NOT NULL, scope TEXT NOT NULL,
  key TEXT NOT NULL, digest TEXT NOT NULL, response BLOB NOT NULL, created_at INTEGER NOT NULL,
  PRIMARY KEY (principal, scope, key)) WITHOUT ROWID;
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


def memory_of(row: sqlite3.Row) -> Memory:
    return Memory(row["id"], row["name"], row["description"], row["parent_id"],
                  bool(row["restricted"]), row["provider"], row["created_by"],
                  row["created_at"], row["updated_at"])


def member_of(row: sqlite3.Row) -> Member:
    return Member(row["id"], row["name"], row["type"], bool(row["admin"]), row["created_at"])


def grant_of(row: sqlite3.Row) -> Grant:
    return Grant(row["id"], row["memory_id"], row["principal"], privs(row["privileges"]),
                 row["created_at"])


def hash_secret(secret: str) -> str:
    """Credentials are random 256-bit secrets, so one SHA-256 pass is the right hash."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


class Statements:
    """The three statement shapes every row helper of the store uses, over ``_db``."""

    _db: sqlite3.Connection

    def _q(self, sql: str, args: Sequence[Any] = ()) -> list[sqlite3.Row]:
        return self._db.execute(sql, args).fetchall()

    def _one(self, sql: str, args: Sequence[Any] = ()) -> sqlite3.Row | None:
        row: sqlite3.Row | None = self._db.execute(sql, args).fetchone()
        return row

    def _x(self, sql: str, args: Sequence[Any] = ()) -> int:
        return self._db.execute(sql, args).rowcount


__all__ = ["BM25", "RANK", "SCHEMA", "SCHEMA_VERSION", "Hit", "Statements", "grant_of",
           "hash_secret", "load", "member_of", "memory_of", "priv_text", "privs"]
