"""Queries over the private index: the eligible set of a recall or grep request, its size,
and its rows in recall order (hn-memory-v0.md §16.3–§16.5).

The only SQL outside :mod:`palimpsest.hn.index`; every value is a bound parameter, and column
names come from fixed tables here, never from a request.

Speed: without topic, term or path filters, rows are walked in recall order along the
``rows_walk`` index, so a page costs about as many row reads as it returns, and counts come from
the per-class ``groups`` totals (or, with a subject filter, from the rows).  With them, FTS5
intersects the posting lists of ``terms`` in C.  A document's ID carries its row's eligibility,
lifecycle rank and trust, so with only those filters besides the postings the count is FTS5
alone over one or a few rowid ranges; kind, actor and subject filters join each match to its
narrow ``row_keys`` entry by integer ID.  The page is either the top of the matches sorted (few
matches) or a walk of ``row_keys_walk`` in recall order that stops after the page (many
matches; bounded by a VM-instruction budget, past which the matches are sorted instead); the
first page of several terms takes its count and page from one intersection.  ``rows`` is read
only for the page itself.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from math import isqrt
from typing import Any

from palimpsest.hn.index.core import LIFECYCLE_RANK, ROW_COLUMNS, IndexTampered, MemoryIndex
from palimpsest.hn.index.schema import KIND_CODE, TRUST_CODE, doc_group, doc_range, match_query


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
    """The eligible set of a request.

    ``where``/``args`` filter ``rows r`` (used when there are no posting filters);
    ``classes``/``class_args`` hold only the lifecycle, trust, kind and actor filters (for the
    ``groups`` totals); ``match`` is the ``terms`` expression of the topic, term and path
    filters ("" when there are none).
    """

    where: str
    args: tuple[Any, ...]
    classes: str
    class_args: tuple[Any, ...]
    simple: bool
    match: str = ""
    ranks: tuple[int, ...] = ()
    trusts: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    actors: tuple[str, ...] = ()
    subject: str = ""


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
    ranks = [LIFECYCLE_RANK[v] for v in lifecycles]

    def member(column: str, values: Sequence[Any]) -> None:
        if values:
            classes.append(f"{column} IN ({','.join('?' * len(values))})")
            class_args.extend(values)

    member("lifecycle_rank", ranks)
    member("trust", trusts)
    member("kind", kinds)
    member("actor", actors)
    clauses = ["r.applicability = 'applicable'", "r.evidence = 'resolved'"]
    clauses += ["r." + c for c in classes]
    args: list[Any] = list(class_args)
    if subject:
        clauses.append("(r.anchor_subject = ? OR r.applies_subject = ?)")
        args += [subject, subject]
    match = match_query(topics=topics, tokens=tokens, path=path)
    return Selection(
        " AND ".join(clauses),
        tuple(args),
        " AND ".join(classes) or "1",
        tuple(class_args),
        simple=not match and not subject,
        match=match,
        ranks=tuple(ranks),
        trusts=tuple(trusts),
        kinds=tuple(kinds),
        actors=tuple(actors),
        subject=subject,
    )


_CHECKED = tuple(
    ROW_COLUMNS.index(c)
    for c in ("applicability", "evidence", "lifecycle_rank", "trust", "kind", "actor",
              "anchor_subject", "applies_subject")
)  # fmt: skip


def admits(sel: Selection, values: Sequence[Any]) -> bool:
    """Whether stored row ``values`` (:data:`ROW_COLUMNS` order) pass the selection's
    eligibility, lifecycle, trust, kind, actor and subject filters (not the postings)."""
    applicability, evidence, rank, trust, kind, actor, anchor, applies = (
        values[i] for i in _CHECKED
    )
    return (
        applicability == "applicable"
        and evidence == "resolved"
        and (not sel.ranks or rank in sel.ranks)
        and (not sel.trusts or trust in sel.trusts)
        and (not sel.kinds or kind in sel.kinds)
        and (not sel.actors or actor in sel.actors)
        and (not sel.subject or sel.subject in (anchor, applies))
    )


def _marks(values: Sequence[Any]) -> str:
    return ",".join("?" * len(values))


def _key_filter(index: MemoryIndex, sel: Selection) -> tuple[str, tuple[Any, ...]] | None:
    """The eligibility and class filters over ``row_keys k``; None when no class can match."""
    clauses: list[str] = ["k.eligible = 1"]
    args: list[Any] = []
    if sel.ranks:
        clauses.append(f"k.lifecycle_rank IN ({_marks(sel.ranks)})")
        args += sel.ranks
    if sel.trusts:
        clauses.append(f"k.trust IN ({_marks(sel.trusts)})")
        args += [TRUST_CODE[t] for t in sel.trusts]
    if sel.kinds or sel.actors:
        names: list[str] = []
        name_args: list[str] = []
        for column, values in (("kind", sel.kinds), ("actor", sel.actors)):
            if values:
                names.append(f"{column} IN ({_marks(values)})")
                name_args += values
        found = [
            int(row[0])
            for row in index.conn.execute(
                f"SELECT cls FROM classes WHERE {' AND '.join(names)}",  # noqa: S608
                name_args,
            )
        ]
        if not found:
            return None
        clauses.append(f"k.cls IN ({_marks(found)})")
        args += found
    if sel.subject:
        clauses.append("(k.anchor_subject = ? OR k.applies_subject = ?)")
        args += [sel.subject, sel.subject]
    return " AND ".join(clauses), tuple(args)


_ALL_RANKS = tuple(range(10))  # LIFECYCLE_RANK values and 9 for anything else
_ALL_CODES = tuple(range(8))


def _doc_ranges(sel: Selection) -> list[tuple[int, int]] | None:
    """The ``terms`` document ID ranges holding exactly the rows that pass the eligibility,
    lifecycle, trust and kind filters, or None when actor or subject filters need the keys."""
    if sel.actors or sel.subject:
        return None
    trusts = sorted(TRUST_CODE[t] for t in sel.trusts) if sel.trusts else _ALL_CODES
    kinds = sorted(KIND_CODE[k] for k in sel.kinds) if sel.kinds else _ALL_CODES
    ranges: list[list[int]] = []
    for rank in sel.ranks or _ALL_RANKS:
        for trust in trusts:
            for kind in kinds:
                group = doc_group(rank, trust, kind)
                if ranges and ranges[-1][1] == group - 1:
                    ranges[-1][1] = group
                else:
                    ranges.append([group, group])
    return [doc_range(first, last) for first, last in ranges]


# The matches of ``terms`` joined to their keys (FTS5 first: CROSS JOIN fixes the order).
_MATCHED = "terms f CROSS JOIN row_keys k ON k.doc = f.rowid"
_KEY_ORDER = " ORDER BY k.lifecycle_rank, k.timestamp DESC, k.id"


def _after(after: tuple[int, str, str] | None, table: str = "r") -> tuple[str, list[Any]]:
    """The cursor's "strictly after this position" in recall order, over ``table``'s columns
    (``r`` = rows, ``k`` = row keys)."""
    if after is None:
        return "", []
    rank, stamp, mid = after
    clause = (
        f" AND ({table}.lifecycle_rank > ? OR ({table}.lifecycle_rank = ? AND"
        f" ({table}.timestamp < ? OR ({table}.timestamp = ? AND {table}.id > ?))))"
    )
    return clause, [rank, rank, stamp, stamp, mid]


def _eligible_total(index: MemoryIndex, sel: Selection) -> int:
    # Only a cost estimate (never an answer), so the totals' MACs are not checked here.
    row = index.conn.execute(
        f"SELECT coalesce(sum(n), 0) FROM groups WHERE {sel.classes}",  # noqa: S608
        sel.class_args,
    ).fetchone()
    return int(row[0])


# Measured in SQLite VM instructions at 100k (docs/benchmarks.md): a walk costs about 5 per
# match (the match list it probes) plus 15 per key it visits, about (eligible rows x page size
# / matches) keys; the sort costs about 19 per match.  So walking wins when it visits fewer keys
# than there are matches.  Its index yields recall order for one rank or for all of them.
_WALK_COST = 1
_TICK = 1000  # VM instructions between two looks at a walk's budget


def _walk_budget(index: MemoryIndex, sel: Selection, matched: int, limit: int) -> int:
    """The VM instructions a walk for this page may use; 0 when sorting the matches is cheaper.

    Matches crowded at the far end of the order would make a walk long: past twice its expected
    cost it is interrupted and the matches are sorted instead.
    """
    if len(sel.ranks) > 1:
        return 0
    visits = _eligible_total(index, sel) * limit // matched + 1
    if visits >= _WALK_COST * matched:
        return 0
    return 2 * (5 * matched + 15 * visits) + 4 * _TICK


def _within(
    index: MemoryIndex, budget: int, sql: str, params: Sequence[Any]
) -> list[tuple[Any, ...]] | None:
    """The rows of ``sql``, or None when it needed more than ``budget`` VM instructions (the
    statement is interrupted)."""
    ticks = 0

    def tick() -> int:
        nonlocal ticks
        ticks += 1
        return int(ticks * _TICK > budget)

    index.conn.set_progress_handler(tick, _TICK)
    try:
        return [tuple(row) for row in index.conn.execute(sql, params)]
    except sqlite3.OperationalError:
        if ticks * _TICK > budget:
            return None
        raise
    finally:
        index.conn.set_progress_handler(None, 0)


_ONE_PASS = True


def _one_pass(
    index: MemoryIndex,
    sel: Selection,
    keyed: tuple[str, tuple[Any, ...]],
    span: tuple[int, int],
    limit: int,
) -> tuple[int, list[str]] | None:
    """The count and the first page of a filter whose matches are one document range, from a
    single FTS5 intersection (materialised once, then counted and sorted).

    Returns None when the matches are so many that a walk would have been cheaper than this
    sort (the statement is interrupted past that point): the caller then counts and walks.
    """
    where, args = keyed
    # Sorting beats walking up to about sqrt(eligible x page size) matches (see _WALK_COST);
    # about 24 VM instructions per match here.
    most = isqrt(_eligible_total(index, sel) * limit) + 1
    rows = _within(
        index,
        2 * 24 * most + 4 * _TICK,
        "WITH m (doc) AS MATERIALIZED (SELECT rowid FROM terms WHERE terms MATCH ?"  # noqa: S608
        " AND rowid BETWEEN ? AND ?) SELECT NULL, NULL, NULL, count(*) FROM m"
        " UNION ALL SELECT * FROM (SELECT k.lifecycle_rank, k.timestamp, k.id, NULL"
        f" FROM m CROSS JOIN row_keys k ON k.doc = m.doc WHERE {where}{_KEY_ORDER} LIMIT ?)",
        (sel.match, *span, *args, limit),
    )
    if rows is None:
        return None
    matched = next(int(row[3]) for row in rows if row[2] is None)
    page = [(int(rank), str(stamp), str(mid)) for rank, stamp, mid, _ in rows if mid is not None]
    # A compound SELECT does not promise the order of its arms' rows: order the page here
    # (§16.4: rank ascending, timestamp descending, ID ascending; three stable sorts).
    page.sort(key=lambda k: k[2])
    page.sort(key=lambda k: k[1], reverse=True)
    page.sort(key=lambda k: k[0])
    return matched, [mid for _, _, mid in page]


def posting_page(
    index: MemoryIndex,
    sel: Selection,
    column: str,
    *,
    after: tuple[int, str, str] | None,
    limit: int,
    bound: int = -1,
) -> tuple[int, int, list[str]]:
    """For a request with topic, term or path filters: the number of eligible rows, the largest
    ``column`` (a byte size) among them, and the IDs of up to ``limit`` rows after ``after`` in
    §16.4 order.

    When no row of the filtered classes is larger than ``bound`` (the MAC-checked per-class
    totals say so), the class-wide largest size is returned instead of the exact one: the
    caller only compares it with ``bound``.

    Raises:
        IndexTampered: a ``groups`` total failed its integrity check (rebuild the index).
    """
    keyed = _key_filter(index, sel)
    if keyed is None:
        return 0, 0, []
    where, args = keyed
    ranges = _doc_ranges(sel)
    biggest = -1
    if ranges is not None:
        _, widest = count_and_max(index, replace(sel, match="", simple=True), column)
        if widest <= bound:
            biggest = widest
    if (
        _ONE_PASS
        and biggest >= 0
        and ranges is not None
        and len(ranges) == 1
        and after is None
        and limit > 0
        and " AND " in sel.match
    ):
        # Several terms, first page: intersect once for both the count and the page.
        found = _one_pass(index, sel, keyed, ranges[0], limit)
        if found is not None:
            return found[0], biggest, found[1]
    if biggest >= 0 and ranges is not None:
        # Counted by FTS5 alone: the document IDs carry eligibility, rank, trust and kind.
        matched = 0
        for low, high in ranges:
            row = index.conn.execute(
                "SELECT count(*) FROM terms WHERE terms MATCH ? AND rowid BETWEEN ? AND ?",
                (sel.match, low, high),
            ).fetchone()
            matched += int(row[0])
    else:
        row = index.conn.execute(
            f"SELECT count(*), coalesce(max(k.{column}), 0) FROM {_MATCHED}"  # noqa: S608
            f" WHERE f.terms MATCH ? AND {where}",
            (sel.match, *args),
        ).fetchone()
        matched, biggest = int(row[0]), int(row[1])
    if not matched or limit < 1:
        return matched, biggest, []
    after_sql, after_args = _after(after, "k")
    # One document range (the usual filters) lets FTS5 skip every other document itself.
    span, span_args = "", []
    if ranges is not None and len(ranges) == 1:
        span, span_args = " AND rowid BETWEEN ? AND ?", list(ranges[0])
    budget = _walk_budget(index, sel, matched, limit)
    if budget:
        walked = _within(
            index,
            budget,
            f"SELECT k.id FROM row_keys k INDEXED BY row_keys_walk WHERE {where}{after_sql}"  # noqa: S608
            f" AND k.doc IN (SELECT rowid FROM terms WHERE terms MATCH ?{span}){_KEY_ORDER}"
            " LIMIT ?",
            (*args, *after_args, sel.match, *span_args, limit),
        )
        if walked is not None:
            return matched, biggest, [str(row[0]) for row in walked]
    sql = (
        f"SELECT k.id FROM {_MATCHED} WHERE f.terms MATCH ?{span.replace('rowid', 'f.rowid')}"  # noqa: S608
        f" AND {where}{after_sql}{_KEY_ORDER} LIMIT ?"
    )
    params = (sel.match, *span_args, *args, *after_args, limit)
    return matched, biggest, [str(r[0]) for r in index.conn.execute(sql, params)]


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
    if sel.match:
        matched, biggest, _ = posting_page(index, sel, column, after=None, limit=0)
        return matched, biggest
    row = index.conn.execute(
        f"SELECT count(*), coalesce(max(r.{column}), 0) FROM rows r WHERE {sel.where}",  # noqa: S608
        sel.args,
    ).fetchone()
    return int(row[0]), int(row[1])


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
    if sel.match:
        keyed = _key_filter(index, sel)
        if keyed is None:
            return 0
        row = index.conn.execute(
            f"SELECT coalesce(sum(k.search_units), 0) FROM {_MATCHED}"  # noqa: S608
            f" WHERE f.terms MATCH ? AND {keyed[0]}",
            (sel.match, *keyed[1]),
        ).fetchone()
    else:
        row = index.conn.execute(
            f"SELECT coalesce(sum(r.search_units), 0) FROM rows r WHERE {sel.where}",  # noqa: S608
            sel.args,
        ).fetchone()
    return int(row[0])


def scan_fields(index: MemoryIndex, sel: Selection) -> Iterator[tuple[str, int, bytes]]:
    """``(id, data_bytes, fields JSON)`` of every eligible row in recall order (for grep).

    With topic, term or path filters only the matching rows are read.
    Unverified: grep re-checks the rows it returns against their MAC-verified JSON.
    """
    if sel.match:
        keyed = _key_filter(index, sel)
        if keyed is None:
            return
        sql = (
            f"SELECT r.id, r.data_bytes, r.fields FROM {_MATCHED} CROSS JOIN rows r"  # noqa: S608
            f" ON r.id = k.id WHERE f.terms MATCH ? AND {keyed[0]}{_KEY_ORDER}"
        )
        args: tuple[Any, ...] = (sel.match, *keyed[1])
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
    if sel.match:
        keyed = _key_filter(index, sel)
        if keyed is None:
            return None
        row = index.conn.execute(
            f"SELECT k.lifecycle_rank, k.timestamp, k.id FROM row_keys k"  # noqa: S608
            f" WHERE k.id = ? AND {keyed[0]}"
            " AND k.doc IN (SELECT rowid FROM terms WHERE terms MATCH ?)",
            (memory, *keyed[1], sel.match),
        ).fetchone()
    else:
        row = index.conn.execute(
            f"SELECT r.lifecycle_rank, r.timestamp, r.id FROM rows r WHERE {sel.where}"  # noqa: S608
            " AND r.id = ?",
            (*sel.args, memory),
        ).fetchone()
    return None if row is None else (int(row[0]), str(row[1]), str(row[2]))


_ORDER = " ORDER BY r.lifecycle_rank, r.timestamp DESC, r.id"


def candidates(
    index: MemoryIndex,
    sel: Selection,
    *,
    after: tuple[int, str, str] | None = None,
    limit: int | None = None,
) -> Iterator[Candidate]:
    """Eligible rows in §16.4 order, starting after ``after``.

    With topic, term or path filters the page's IDs come from :func:`posting_page` and only
    those rows are read (all matches' rows when there is no limit).
    """
    if sel.match:
        if limit is None:
            keyed = _key_filter(index, sel)
            if keyed is None:
                return
            after_sql, after_args = _after(after, "k")
            for *values, mac in index.conn.execute(
                f"SELECT {_COLUMNS}, r.mac FROM {_MATCHED} CROSS JOIN rows r"  # noqa: S608
                f" ON r.id = k.id WHERE f.terms MATCH ? AND {keyed[0]}{after_sql}{_KEY_ORDER}",
                (sel.match, *keyed[1], *after_args),
            ):
                yield Candidate(tuple(values), str(mac))
            return
        _, _, ids = posting_page(index, sel, "content_bytes", after=after, limit=limit)
        yield from rows_by_id(index, ids)
        return
    after_sql, after_args = _after(after)
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
    "admits",
    "candidates",
    "count_and_max",
    "position_after",
    "posting_page",
    "rows_by_id",
    "scan_fields",
    "selection",
    "sum_search_units",
]
