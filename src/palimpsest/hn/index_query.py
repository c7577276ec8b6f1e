"""Queries over the private index: the eligible set of a recall or grep request, its size,
and its rows in recall order (hn-memory-v0.md §16.3–§16.5).

The only SQL outside :mod:`palimpsest.hn.index`; every value is a bound parameter, and column
names come from fixed tables here, never from a request.

Speed: rows are walked in recall order along the ``rows_walk`` index, so a page costs about as
many row reads as it returns; counts come from the per-class ``groups`` totals when the request
filters only by lifecycle, trust, kind and actor, and otherwise from the postings of the first
topic, term or path joined to the rows (never from a scan of every row).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from palimpsest.hn.index import LIFECYCLE_RANK, ROW_COLUMNS, IndexTampered, MemoryIndex


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
_COLUMNS = ", ".join("r." + c for c in ROW_COLUMNS)


@dataclass(frozen=True, slots=True)
class Selection:
    """The eligible set of a request as SQL over ``rows r`` (clause and parameters).

    ``classes``/``class_args`` hold only the lifecycle, trust, kind and actor filters (for the
    ``groups`` totals); ``postings`` lists the topic, term and path filters, the rarest of
    which drives counting.
    """

    where: str
    args: tuple[Any, ...]
    classes: str
    class_args: tuple[Any, ...]
    simple: bool
    base: str = ""  # ``where`` without any postings clause
    base_args: tuple[Any, ...] = ()
    postings: tuple[tuple[str, str, str], ...] = ()  # every (table, column, value) filter


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
    classes: list[str] = []
    class_args: list[Any] = []

    def member(column: str, values: Sequence[Any]) -> None:
        if values:
            classes.append(f"{column} IN ({','.join('?' * len(values))})")
            class_args.extend(values)

    member("lifecycle_rank", [LIFECYCLE_RANK[v] for v in lifecycles])
    member("trust", trusts)
    member("kind", kinds)
    member("actor", actors)
    clauses = ["r.applicability = 'applicable'", "r.evidence = 'resolved'"]
    clauses += ["r." + c for c in classes]
    args: list[Any] = list(class_args)
    if subject:
        clauses.append("(r.anchor_subject = ? OR r.applies_subject = ?)")
        args += [subject, subject]
    base, base_args = " AND ".join(clauses), tuple(args)
    postings = tuple(
        (table, column, value)
        for table, column, values in (
            ("topics", "topic", topics),
            ("tokens", "token", tokens),
            ("paths", "path", [path] if path else []),
        )
        for value in values
    )
    for table, column, value in postings:
        clauses.append(_posting_clause(table, column))
        args.append(value)
    return Selection(
        " AND ".join(clauses),
        tuple(args),
        " AND ".join(classes) or "1",
        tuple(class_args),
        simple=not postings and not subject,
        base=base,
        base_args=base_args,
        postings=postings,
    )


def _posting_clause(table: str, column: str) -> str:
    return f"r.id IN (SELECT id FROM {table} WHERE {column} = ?)"  # noqa: S608


_PROBE = 1 << 16  # postings are counted up to here when choosing the rarest filter term


def _rarest(
    index: MemoryIndex, sel: Selection
) -> tuple[tuple[str, str, str], str, tuple[Any, ...]]:
    """The posting filter with the fewest entries, and the WHERE clause for the others."""
    best = sel.postings[0]
    if len(sel.postings) > 1:
        sizes = []
        for table, column, value in sel.postings:
            row = index.conn.execute(
                f"SELECT count(*) FROM (SELECT 1 FROM {table} WHERE {column} = ? LIMIT ?)",  # noqa: S608
                (value, _PROBE),
            ).fetchone()
            sizes.append(int(row[0]))
        best = sel.postings[sizes.index(min(sizes))]
    clauses, args = [sel.base], list(sel.base_args)
    skipped = False
    for item in sel.postings:
        if item == best and not skipped:
            skipped = True
            continue
        # One primary-key probe per candidate of the rarest list, no materialised ID list.
        clauses.append(f"EXISTS (SELECT 1 FROM {item[0]} WHERE {item[1]} = ? AND id = r.id)")  # noqa: S608
        args.append(item[2])
    return best, " AND ".join(clauses), tuple(args)


def count_and_max(index: MemoryIndex, sel: Selection, column: str) -> tuple[int, int]:
    """Number of eligible rows and the largest ``column`` (a byte size) among them.

    Raises:
        IndexTampered: a ``groups`` total failed its integrity check (rebuild the index).
    """
    if sel.simple:
        total, biggest = 0, 0
        pick = 5 if column == "content_bytes" else 6
        for *values, mac in index.conn.execute(
            f"SELECT * FROM groups WHERE {sel.classes}",  # noqa: S608
            sel.class_args,
        ):
            if not index.row_valid(values, str(mac)):
                raise IndexTampered("groups")
            total += int(values[4])
            biggest = max(biggest, int(values[pick]))
        return total, biggest
    if sel.postings:
        (table, key, value), rest, rest_args = _rarest(index, sel)
        row = index.conn.execute(
            f"SELECT count(*), coalesce(max(r.{column}), 0) FROM {table} d"  # noqa: S608
            f" CROSS JOIN rows r ON r.id = d.id WHERE d.{key} = ? AND {rest}",
            (value, *rest_args),
        ).fetchone()
    else:
        row = index.conn.execute(
            f"SELECT count(*), coalesce(max(r.{column}), 0) FROM rows r WHERE {sel.where}",  # noqa: S608
            sel.args,
        ).fetchone()
    return int(row[0]), int(row[1])


def posting_page(
    index: MemoryIndex,
    sel: Selection,
    column: str,
    *,
    after: tuple[int, str, str] | None,
    limit: int,
) -> tuple[int, int, list[str]]:
    """For a request with topic, term or path filters: the number of eligible rows, their
    largest ``column``, and the IDs of the page after ``after`` in §16.4 order, in one pass.

    The rarest posting list is joined to the rows once (through the covering ``rows_by_id``
    index) instead of once to count and again to order the page; the order is applied here
    with the same keys as :data:`_ORDER` (rank ascending, timestamp descending, ID ascending;
    every key is ASCII, so Python's string order equals SQLite's BINARY collation).
    """
    (table, key, value), rest, rest_args = _rarest(index, sel)
    found = index.conn.execute(
        f"SELECT r.lifecycle_rank, r.timestamp, r.id, r.{column} FROM {table} d"  # noqa: S608
        f" CROSS JOIN rows r INDEXED BY rows_by_id ON r.id = d.id WHERE d.{key} = ? AND {rest}",
        (value, *rest_args),
    ).fetchall()
    biggest = max((int(row[3]) for row in found), default=0)
    keyed = [(int(rank), str(stamp), str(mid)) for rank, stamp, mid, _ in found]
    if after is not None:
        rank0, stamp0, mid0 = after
        keyed = [
            k
            for k in keyed
            if k[0] > rank0
            or (k[0] == rank0 and (k[1] < stamp0 or (k[1] == stamp0 and k[2] > mid0)))
        ]
    # Three stable sorts, least significant key first, give the mixed-direction order.
    keyed.sort(key=lambda k: k[2])
    keyed.sort(key=lambda k: k[1], reverse=True)
    keyed.sort(key=lambda k: k[0])
    return len(found), biggest, [k[2] for k in keyed[:limit]]


def sum_search_units(index: MemoryIndex, sel: Selection) -> int:
    """``Σ(fieldUTF8Bytes + 1)`` over the grep surface of every eligible row."""
    if sel.simple:
        total = 0
        for *values, mac in index.conn.execute(
            f"SELECT * FROM groups WHERE {sel.classes}",  # noqa: S608
            sel.class_args,
        ):
            if not index.row_valid(values, str(mac)):
                raise IndexTampered("groups")
            total += int(values[7])
        return total
    if sel.postings:
        (table, key, value), rest, rest_args = _rarest(index, sel)
        row = index.conn.execute(
            f"SELECT coalesce(sum(r.search_units), 0) FROM {table} d"  # noqa: S608
            f" CROSS JOIN rows r INDEXED BY rows_by_id ON r.id = d.id WHERE d.{key} = ? AND {rest}",
            (value, *rest_args),
        ).fetchone()
    else:
        row = index.conn.execute(
            f"SELECT coalesce(sum(r.search_units), 0) FROM rows r WHERE {sel.where}",  # noqa: S608
            sel.args,
        ).fetchone()
    return int(row[0])


def scan_fields(index: MemoryIndex, sel: Selection) -> Iterator[tuple[str, int, bytes]]:
    """``(id, data_bytes, fields JSON)`` of every eligible row in recall order (for grep).

    With topic, term or path filters only the rarest posting list's rows are read.
    Unverified: grep re-checks the rows it returns against their MAC-verified JSON.
    """
    if sel.postings:
        (table, key, value), rest, rest_args = _rarest(index, sel)
        sql = (
            f"SELECT r.id, r.data_bytes, r.fields FROM {table} d CROSS JOIN rows r"  # noqa: S608
            f" ON r.id = d.id WHERE d.{key} = ? AND {rest}{_ORDER}"
        )
        args: tuple[Any, ...] = (value, *rest_args)
    else:
        sql = (
            f"SELECT r.id, r.data_bytes, r.fields FROM rows r INDEXED BY rows_walk"  # noqa: S608
            f" WHERE {sel.where}{_ORDER}"
        )
        args = sel.args
    for mid, data_bytes, fields in index.conn.execute(sql, args):
        yield str(mid), int(data_bytes), bytes(fields)


def rows_by_id(index: MemoryIndex, ids: Sequence[str]) -> list[Candidate]:
    """The full rows of ``ids``, in the order given."""
    if not ids:
        return []
    marks = ",".join("?" * len(ids))
    found = {
        str(values[0]): Candidate(tuple(values), str(mac))
        for *values, mac in index.conn.execute(
            f"SELECT {_COLUMNS}, r.mac FROM rows r WHERE r.id IN ({marks})",  # noqa: S608
            tuple(ids),
        )
    }
    return [found[i] for i in ids if i in found]


def position_after(index: MemoryIndex, sel: Selection, memory: str) -> tuple[int, str, str] | None:
    """The sort key of ``memory`` if it is in the eligible set."""
    row = index.conn.execute(
        f"SELECT r.lifecycle_rank, r.timestamp, r.id FROM rows r WHERE {sel.where}"  # noqa: S608
        " AND r.id = ?",
        (*sel.args, memory),
    ).fetchone()
    return None if row is None else (int(row[0]), str(row[1]), str(row[2]))


def _after(after: tuple[int, str, str] | None) -> tuple[str, list[Any]]:
    if after is None:
        return "", []
    rank, stamp, mid = after
    clause = (
        " AND (r.lifecycle_rank > ? OR (r.lifecycle_rank = ? AND"
        " (r.timestamp < ? OR (r.timestamp = ? AND r.id > ?))))"
    )
    return clause, [rank, rank, stamp, stamp, mid]


_ORDER = " ORDER BY r.lifecycle_rank, r.timestamp DESC, r.id"


def candidates(
    index: MemoryIndex,
    sel: Selection,
    *,
    after: tuple[int, str, str] | None = None,
    limit: int | None = None,
) -> Iterator[Candidate]:
    """Eligible rows in §16.4 order, starting after ``after``.

    With topic, term or path filters and a limit, the page's IDs are found from the rarest
    posting list through a covering index and only those rows are read; otherwise the rows are
    walked in order.
    """
    after_sql, after_args = _after(after)
    if sel.postings and limit is not None:
        (table, key, value), rest, rest_args = _rarest(index, sel)
        ids = [
            str(row[0])
            for row in index.conn.execute(
                f"SELECT r.id FROM {table} d CROSS JOIN rows r INDEXED BY rows_by_id"  # noqa: S608
                f" ON r.id = d.id WHERE d.{key} = ? AND {rest}{after_sql}{_ORDER} LIMIT ?",
                (value, *rest_args, *after_args, limit),
            )
        ]
        yield from rows_by_id(index, ids)
        return
    sql = (
        f"SELECT {_COLUMNS}, r.mac FROM rows r INDEXED BY rows_walk"  # noqa: S608
        f" WHERE {sel.where}{after_sql}{_ORDER}"
    )
    args = [*sel.args, *after_args]
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
    "position_after",
    "posting_page",
    "rows_by_id",
    "scan_fields",
    "selection",
    "sum_search_units",
]
