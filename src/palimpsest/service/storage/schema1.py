"""Reading a store of schema 1 (the two-models layout before one history), for
``pal admin migrate``: salted record bodies, Memory Git content inside changeset documents, the
separate ``mg_requests`` table. The database is only read; the conversion itself is
:mod:`palimpsest.service.upgrade`, the writing of the new store :class:`.sqlite.SqliteStore`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from palimpsest.service.model import Ref, unavailable
from palimpsest.service.storage.schema import load

# Tables whose rows carry over unchanged (same columns in schema 2).
PLAIN = ("members", "groups", "memberships", "credentials", "memories", "grants", "files",
         "mg_nonces", "mg_settings")
# Tables of JSON documents whose changeset ids are rewritten: (table, key columns, doc column).
DOCUMENTS: tuple[tuple[str, tuple[str, ...], str], ...] = (
             ("docs", ("kind", "id", "memory_id", "created_at"), "doc"),
             ("mg_reviews", ("review_id", "proposal_id", "seq"), "doc"),
             ("mg_advances", ("advance_id", "project_id", "ref_name", "seq"), "doc"),
             ("mg_manifests", ("manifest_id", "project_id"), "doc"),
             ("mg_conflicts", ("conflict_id", "proposal_id", "project_id", "status", "seq"),
              "doc"))


def checkpoint(path: Path) -> None:
    """Fold an old database's WAL into its file, so one file holds all of it."""
    try:
        db = sqlite3.connect(path)
        try:
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            db.close()
    except sqlite3.Error as exc:
        raise unavailable(f"cannot read the old store {path}: {exc}") from exc


class Schema1:
    """A schema-1 database, read-only (the base of the readers of later old schemas)."""

    SCHEMA = "1"

    def __init__(self, path: Path) -> None:
        # Opened read-write but only ever read: a read-only connection to a WAL database
        # would leave its -shm and -wal files behind.
        try:
            self._db = sqlite3.connect(path)
            self._db.row_factory = sqlite3.Row
            row = self._db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
        except sqlite3.Error as exc:
            raise unavailable(f"cannot read the old store {path}: {exc}") from exc
        if row is None or row[0] != self.SCHEMA:
            self._db.close()
            raise unavailable(f"{path} is not a store of schema {self.SCHEMA}; nothing to "
                              "migrate")

    def close(self) -> None:
        """Close the connection."""
        self._db.close()

    def _has(self, table: str) -> bool:
        return self._db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?",
                                (table,)).fetchone() is not None

    def changesets(self) -> Iterator[dict[str, Any]]:
        """Every changeset document in append order (parents first)."""
        for r in self._db.execute("SELECT doc FROM changesets ORDER BY seq").fetchall():
            yield load(r["doc"])

    def body(self, digest: str) -> tuple[bytes, bytes] | None:
        """``(salt, canonical body bytes)`` of a salted body, ``None`` once erased."""
        r = self._db.execute("SELECT salt, data FROM bodies WHERE digest=?",
                             (digest,)).fetchone()
        return (bytes(r["salt"]), bytes(r["data"])) if r is not None else None

    def refs(self) -> list[Ref]:
        """Every ref."""
        return [Ref(r["memory_id"], r["name"], r["head"], bool(r["protected"]), r["created_by"],
                    r["created_at"], r["updated_at"])
                for r in self._db.execute("SELECT * FROM refs").fetchall()]

    def rows(self, table: str) -> tuple[list[str], list[tuple[Any, ...]]]:
        """Column names and rows of a table carried over as it is."""
        if not self._has(table):
            return [], []
        cur = self._db.execute(f"SELECT * FROM {table}")  # noqa: S608 — names from PLAIN
        return [d[0] for d in cur.description], [tuple(r) for r in cur.fetchall()]

    def documents(self, table: str, keys: tuple[str, ...], column: str
                  ) -> list[tuple[tuple[Any, ...], Any]]:
        """``(key values, parsed document)`` of a document table."""
        if not self._has(table):
            return []
        sql = f"SELECT {', '.join(keys)}, {column} FROM {table}"  # noqa: S608 — fixed names
        return [(tuple(r)[:-1], load(r[-1])) for r in self._db.execute(sql).fetchall()]

    def proposals(self) -> list[tuple[dict[str, Any], str | None, int]]:
        """Every proposal document with the idempotency key it was opened under and its
        sequence number, in order."""
        if not self._has("mg_proposals"):
            return []
        return [(load(r[0]), r[1], int(r[2])) for r in self._db.execute(
            "SELECT doc, idempotency_key, seq FROM mg_proposals ORDER BY seq").fetchall()]

    def idempotency(self) -> list[tuple[str, str, str, str, Any, int]]:
        """Stored responses of UHP writes and Memory Git idempotent routes."""
        return [(r[0], r[1], r[2], r[3], load(r[4]), int(r[5])) for r in self._db.execute(
            "SELECT principal, scope, key, digest, response, created_at FROM idempotency"
        ).fetchall()]

    def changeset_keys(self) -> list[tuple[str, str, str, str]]:
        """``(project, author, key, changeset id)`` of Memory Git commits made under a key."""
        if not self._has("mg_requests"):
            return []
        return [(r[0], r[1], r[2], r[3]) for r in self._db.execute(
            "SELECT project_id, author, idempotency_key, changeset_id FROM mg_requests"
        ).fetchall()]


__all__ = ["DOCUMENTS", "PLAIN", "Schema1", "checkpoint"]
