"""The statements of the shared row helpers, run on PostgreSQL.

:mod:`..tree`, :mod:`..records`, :mod:`..changesets`, :mod:`..principals`, :mod:`..files` and
Memory Git's :mod:`..memorygit` write their SQL once, in the ground both databases share, with
SQLite's ``?`` placeholders. :func:`translate` turns the few spellings PostgreSQL says
otherwise — mechanically, never by reading values:

- ``?`` becomes ``%s`` (and a literal ``%`` is doubled);
- ``x IS ?`` / ``x IS NOT ?`` (SQLite's null-safe comparison) become ``IS [NOT] DISTINCT FROM``;
- ``INSERT OR IGNORE`` becomes ``INSERT … ON CONFLICT DO NOTHING``;
- ``LIMIT -1`` (no limit) becomes ``LIMIT ALL``;
- an ``INSERT`` into a table keyed by a generated number returns it (SQLite's ``lastrowid``).

Values are bound by psycopg on the client (:class:`psycopg.ClientCursor`: quoted by libpq, so a
value can never become syntax), which lets an untyped ``NULL`` stand where SQLite takes one
(``? IS NULL OR …``). Rows come back as :class:`Row`: by column name or position, like
``sqlite3.Row``.

:class:`PgConnection` is the store's one connection object: inside a transaction it runs on the
pooled connection the transaction holds; outside, one statement borrows a pooled connection
in autocommit (as SQLite runs a statement outside a transaction).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from functools import lru_cache
from typing import Any, ClassVar, Final

import psycopg
from psycopg_pool import ConnectionPool

# Tables whose key is a generated number an INSERT hands back (as SQLite's rowid).
GENERATED: Final = {"names": "k", "changesets": "seq", "records": "n"}
_IS_NOT: Final = re.compile(r"\bIS NOT \?")
_IS: Final = re.compile(r"\bIS \?")
_INSERT: Final = re.compile(r"\s*INSERT INTO (\w+)")
_WRITES: Final = ("INSERT", "UPDATE", "DELETE")


@lru_cache(maxsize=4096)
def translate(sql: str) -> str:
    """The PostgreSQL spelling of one shared statement (see the module docs)."""
    out = sql.replace("%", "%%")
    out = _IS_NOT.sub("IS DISTINCT FROM ?", out)
    out = _IS.sub("IS NOT DISTINCT FROM ?", out)
    out = out.replace("LIMIT -1", "LIMIT ALL")
    if out.lstrip().startswith("INSERT OR IGNORE "):
        out = out.replace("INSERT OR IGNORE ", "INSERT ", 1) + " ON CONFLICT DO NOTHING"
    found = _INSERT.match(out)
    if found is not None and found.group(1) in GENERATED and " RETURNING " not in out:
        out += " RETURNING " + GENERATED[found.group(1)]
    return out.replace("?", "%s")


class Row(tuple[Any, ...]):
    """A result row read by column name or by position (as ``sqlite3.Row``)."""

    _index: ClassVar[dict[str, int]] = {}

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return tuple.__getitem__(self, self._index[key])
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        """The column names, in order."""
        return list(self._index)


@lru_cache(maxsize=1024)
def _row_class(names: tuple[str, ...]) -> type[Row]:
    return type("Row", (Row,), {"_index": {n: i for i, n in enumerate(names)},
                                "__slots__": ()})


def row_factory(cursor: Any) -> Any:
    """psycopg's row factory for :class:`Row`."""
    description = cursor.description
    if description is None:
        return tuple
    cls = _row_class(tuple(d.name for d in description))
    return cls


class Result:
    """An executed statement, its rows read in full (the shape of a ``sqlite3.Cursor`` the
    row helpers use)."""

    def __init__(self, rows: list[Any], rowcount: int, lastrowid: int | None) -> None:
        self._rows = rows
        self._at = 0
        self._rowcount = rowcount
        self._lastrowid = lastrowid

    @property
    def rowcount(self) -> int:
        """Rows the statement inserted, updated or deleted."""
        return self._rowcount

    @property
    def lastrowid(self) -> int | None:
        """The generated key of the row an ``INSERT`` made (``None``: it made none)."""
        return self._lastrowid

    def fetchone(self) -> Any:
        """The next row, ``None`` past the last."""
        if self._at >= len(self._rows):
            return None
        self._at += 1
        return self._rows[self._at - 1]

    def fetchall(self) -> list[Any]:
        """Every remaining row."""
        rest, self._at = self._rows[self._at:], len(self._rows)
        return rest

    def __iter__(self) -> Iterator[Any]:
        return iter(self.fetchall())


class PgConnection:
    """The store's statements over a pool (see the module docs)."""

    def __init__(self, pool: ConnectionPool[Any]) -> None:
        self._pool = pool
        self._conn: psycopg.Connection[Any] | None = None
        self.changes = 0  # rows written through this object (SQLite's total_changes)

    def bind(self, conn: psycopg.Connection[Any] | None) -> None:
        """Run statements on ``conn`` (a transaction's) until unbound (``None``)."""
        self._conn = conn

    def execute(self, sql: str, parameters: Any = (), /) -> Result:
        """Run one shared statement (``?`` placeholders)."""
        if self._conn is not None:
            return self._run(self._conn, sql, parameters)
        with self._pool.connection() as conn:
            return self._run(conn, sql, parameters)

    def executemany(self, sql: str, parameters: Any, /) -> Result:
        """Run one statement per row of parameters."""
        rows = [tuple(p) for p in parameters]
        if self._conn is not None:
            return self._many(self._conn, sql, rows)
        with self._pool.connection() as conn:
            return self._many(conn, sql, rows)

    def _run(self, conn: psycopg.Connection[Any], sql: str, parameters: Any) -> Result:
        text = translate(sql)
        with conn.cursor() as cur:
            cur.execute(text, tuple(parameters))
            rows = cur.fetchall() if cur.description is not None else []
            count = cur.rowcount
        last = None
        if " RETURNING " in text and rows:
            last = int(rows[0][0])
        if sql.lstrip().startswith(_WRITES) and count > 0:
            self.changes += count
        return Result(rows, count, last)

    def _many(self, conn: psycopg.Connection[Any], sql: str, rows: Sequence[tuple[Any, ...]]
              ) -> Result:
        with conn.cursor() as cur:
            cur.executemany(translate(sql), rows)
            count = cur.rowcount
        self.changes += max(count, 0)
        return Result([], count, None)


__all__ = ["GENERATED", "PgConnection", "Result", "Row", "row_factory", "translate"]
