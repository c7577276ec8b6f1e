"""Rows of the audit log: one row per write and per refusal, never a byte of content.

A base of :class:`~palimpsest.service.storage.sqlite.SqliteStore`, like :mod:`.principals`: it
runs statements on the store's connection and never opens a transaction itself. The table is
append-only through the service: rows are inserted, and deleted only by age
(:meth:`AuditRows.prune_audit`, the retention setting); a trigger refuses every ``UPDATE``.
It lives in the one database file, so a backup of the store carries it.

The SQL is deliberately plain (one table, ``INSERT``, ``SELECT … WHERE … ORDER BY seq DESC
LIMIT``, ``DELETE … WHERE at < ?``) so every backend writes it the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from palimpsest.service.model import AuditEntry
from palimpsest.service.storage.schema import Statements

AUDIT_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS audit (seq INTEGER PRIMARY KEY AUTOINCREMENT, at INTEGER NOT NULL,
  surface TEXT NOT NULL, action TEXT NOT NULL, outcome TEXT NOT NULL, reason TEXT,
  status INTEGER, member_id TEXT, credential_id TEXT, memory_id TEXT, request_id TEXT);
CREATE INDEX IF NOT EXISTS audit_at ON audit(at);
CREATE INDEX IF NOT EXISTS audit_member ON audit(member_id, seq);
CREATE INDEX IF NOT EXISTS audit_memory ON audit(memory_id, seq);
CREATE TRIGGER IF NOT EXISTS audit_append_only BEFORE UPDATE ON audit
  BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
"""
_COLUMNS: Final = ("at", "surface", "action", "outcome", "reason", "status", "member_id",
                   "credential_id", "memory_id", "request_id")


def _entry(row: Any) -> AuditEntry:
    return AuditEntry(at=row["at"], surface=row["surface"], action=row["action"],
                      outcome=row["outcome"], reason=row["reason"], status=row["status"],
                      member_id=row["member_id"], credential_id=row["credential_id"],
                      memory_id=row["memory_id"], request_id=row["request_id"], seq=row["seq"])


class AuditRows(Statements):
    """Statement helpers over ``_db`` and the ``audit`` table."""

    def append_audit(self, entries: Sequence[AuditEntry]) -> None:
        """Append entries in order (inside a write)."""
        sql = (f"INSERT INTO audit ({', '.join(_COLUMNS)}) "  # noqa: S608 -- fixed names
               f"VALUES ({', '.join('?' * len(_COLUMNS))})")
        for e in entries:
            self._x(sql, tuple(getattr(e, c) for c in _COLUMNS))

    def audit_entries(self, *, member_id: str | None = None, memory_id: str | None = None,
                      outcome: str | None = None, since: int | None = None,
                      until: int | None = None, limit: int = 100) -> list[AuditEntry]:
        """Entries matching every given filter (``since`` ≤ at < ``until``), newest first."""
        where: list[str] = []
        args: list[Any] = []
        for column, value in (("member_id", member_id), ("memory_id", memory_id),
                              ("outcome", outcome)):
            if value is not None:
                where.append(f"{column} = ?")
                args.append(value)
        if since is not None:
            where.append("at >= ?")
            args.append(since)
        if until is not None:
            where.append("at < ?")
            args.append(until)
        clause = f"WHERE {' AND '.join(where)} " if where else ""
        rows = self._q(f"SELECT * FROM audit {clause}ORDER BY seq DESC LIMIT ?",  # noqa: S608
                       (*args, limit))
        return [_entry(r) for r in rows]

    def prune_audit(self, before: int) -> int:
        """Delete the entries older than ``before`` (epoch ms; inside a write); how many."""
        return self._x("DELETE FROM audit WHERE at < ?", (before,))


__all__ = ["AUDIT_SCHEMA", "AuditRows"]
