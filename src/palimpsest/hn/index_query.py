"""Queries over the private index: the eligible set of a recall or grep request, its size,
and its rows in recall order (hn-memory-v0.md §16.3–§16.5).

The only SQL outside :mod:`palimpsest.hn.index`; every value is a bound parameter, and column
names come from fixed tables here, never from a request.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from palimpsest.hn.index import LIFECYCLE_RANK, ROW_COLUMNS, MemoryIndex


@dataclass(frozen=True, slots=True)
class Candidate:
    """One eligible row in recall order: every stored column plus its HMAC."""

    values: tuple[Any, ...]  # ROW_COLUMNS order
    mac: str

    @property
    def id(self) -> str:
        """The memory ID."""
        return str(self.values[0])

    @property
    def content_bytes(self) -> int:
        """Length of the JSON encoding of ``data.content`` (recall's budget)."""
        return int(self.values[_CONTENT])

    @property
    def data_bytes(self) -> int:
        """Length of the JSON encoding of the whole ``data`` object (grep's budget)."""
        return int(self.values[_DATA])

    @property
    def json(self) -> bytes:
        """The exact recall JSON of the record."""
        return bytes(self.values[_JSON])

    @property
    def deps(self) -> bytes:
        """The JSON list of the row's missing dependencies."""
        return bytes(self.values[_DEPS])


_CONTENT = ROW_COLUMNS.index("content_bytes")
_DATA = ROW_COLUMNS.index("data_bytes")
_JSON = ROW_COLUMNS.index("json")
_DEPS = ROW_COLUMNS.index("deps")
_COLUMNS = ", ".join(ROW_COLUMNS)


@dataclass(frozen=True, slots=True)
class Selection:
    """SQL for the eligible set of a request (the WHERE clause and its parameters)."""

    where: str
    args: tuple[Any, ...]


def selection(
    *,
    subject: str,
    path: str,
    topics: Sequence[str],
    kinds: Sequence[str],
    actors: Sequence[str],
    lifecycles: Sequence[str],
    trusts: Sequence[str],
    tokens: Sequence[str],
) -> Selection:
    """Build the candidate filter of §16.3 (applicable, resolved evidence, then the filters)."""
    clauses = ["applicability = 'applicable'", "evidence = 'resolved'"]
    args: list[Any] = []

    def member(column: str, values: Sequence[Any]) -> None:
        if values:
            clauses.append(f"{column} IN ({','.join('?' * len(values))})")
            args.extend(values)

    member("lifecycle_rank", [LIFECYCLE_RANK[v] for v in lifecycles])
    member("trust", trusts)
    member("kind", kinds)
    member("actor", actors)
    if subject:
        clauses.append("(anchor_subject = ? OR applies_subject = ?)")
        args += [subject, subject]
    if path:
        clauses.append("id IN (SELECT id FROM paths WHERE path = ?)")
        args.append(path)
    for topic in topics:
        clauses.append("id IN (SELECT id FROM topics WHERE topic = ?)")
        args.append(topic)
    for token in tokens:
        clauses.append("id IN (SELECT id FROM tokens WHERE token = ?)")
        args.append(token)
    return Selection(" AND ".join(clauses), tuple(args))


_ORDER = "ORDER BY lifecycle_rank, timestamp DESC, id"


def count_and_max(index: MemoryIndex, sel: Selection, column: str) -> tuple[int, int]:
    """Number of eligible rows and the largest ``column`` (a byte size) among them."""
    assert column in ("content_bytes", "data_bytes", "search_units")  # noqa: S101 - internal
    row = index.conn.execute(
        f"SELECT count(*), coalesce(max({column}), 0)"  # noqa: S608
        f" FROM rows WHERE {sel.where}",
        sel.args,
    ).fetchone()
    return int(row[0]), int(row[1])


def sum_search_units(index: MemoryIndex, sel: Selection) -> int:
    """``Σ(fieldUTF8Bytes + 1)`` over the grep surface of every eligible row."""
    row = index.conn.execute(
        f"SELECT coalesce(sum(search_units), 0) FROM rows WHERE {sel.where}",  # noqa: S608
        sel.args,
    ).fetchone()
    return int(row[0])


def position_after(index: MemoryIndex, sel: Selection, memory: str) -> tuple[int, str, str] | None:
    """The sort key of ``memory`` if it is in the eligible set."""
    row = index.conn.execute(
        f"SELECT lifecycle_rank, timestamp, id FROM rows WHERE {sel.where} AND id = ?",  # noqa: S608
        (*sel.args, memory),
    ).fetchone()
    return None if row is None else (int(row[0]), str(row[1]), str(row[2]))


def count_through(index: MemoryIndex, sel: Selection, key: tuple[int, str, str]) -> int:
    """Number of eligible rows up to and including the row with sort ``key``."""
    rank, stamp, mid = key
    row = index.conn.execute(
        f"SELECT count(*) FROM rows WHERE {sel.where} AND (lifecycle_rank < ? OR"  # noqa: S608
        " (lifecycle_rank = ? AND (timestamp > ? OR (timestamp = ? AND id <= ?))))",
        (*sel.args, rank, rank, stamp, stamp, mid),
    ).fetchone()
    return int(row[0])


def candidates(
    index: MemoryIndex,
    sel: Selection,
    *,
    after: tuple[int, str, str] | None = None,
    limit: int | None = None,
) -> Iterator[Candidate]:
    """Eligible rows in §16.4 order, starting after ``after``."""
    where, args = sel.where, list(sel.args)
    if after is not None:
        rank, stamp, mid = after
        where += (
            " AND (lifecycle_rank > ? OR (lifecycle_rank = ? AND"
            " (timestamp < ? OR (timestamp = ? AND id > ?))))"
        )
        args += [rank, rank, stamp, stamp, mid]
    sql = f"SELECT {_COLUMNS}, mac FROM rows WHERE {where} {_ORDER}"  # noqa: S608
    if limit is not None:
        sql += " LIMIT ?"
        args.append(limit)
    for *values, mac in index.conn.execute(sql, args):
        yield Candidate(tuple(values), str(mac))


__all__ = [
    "Candidate",
    "Selection",
    "candidates",
    "count_and_max",
    "count_through",
    "position_after",
    "selection",
    "sum_search_units",
]
