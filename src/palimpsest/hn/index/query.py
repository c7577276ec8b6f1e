"""Queries over the private index: the eligible set of a recall or grep request at one query
context, its size, its largest record, and its rows in recall order (hn-memory-v0.md
§16.3–§16.5).

Every value is a bound parameter; column names come from fixed tables here, never from a
request.  A request is split in two: the :class:`Selection` (lifecycle ranks and the postings of
its topics, lexical terms, path and subject — all free of context) and the :class:`View` of its
query context (which classes of actor and kind its kind, actor and trust filters admit under the
policy there, which anchors its descendants rows apply under, whether exact rows are anchored at
the query commit, whether a subject lets subject rows apply), computed by
:mod:`palimpsest.hn.recall.context`.

Counts: a document's ID in ``terms`` carries its row's eligibility, mode, lifecycle rank and
class, so a count is FTS5 alone over a few rowid ranges — per mode: descendants rows (less those
anchored where the query commit does not reach, counted by their anchor postings), exact rows
anchored at the query commit, subject rows under the subject.  Without postings the descendants
count comes from the MAC-checked per-class totals.  The largest record size is an upper bound
from the totals (the caller computes the exact one only when that bound is over its limit).

Pages: the eligible keys are walked in recall order along ``row_keys_walk`` with the context's
predicate and stopped after the page (few rows visited when matches are common), or the matches
are gathered and sorted (few matches); the choice compares the expected keys a walk visits with
the matches, and a walk past twice its expected cost (measured in SQLite VM instructions) is
interrupted and the matches are sorted instead.  ``rows`` is read only for the page itself.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from palimpsest.hn.index.core import MemoryIndex
from palimpsest.hn.index.schema import (
    COLUMN,
    DESCENDANTS,
    EXACT,
    LIFECYCLE_RANK,
    ROW_COLUMNS,
    SUBJECT,
    IndexTampered,
    any_anchor,
    doc_group,
    group_range,
    match_query,
)

TYPE_CHECKING = False  # typing stays unimported at run time (the warm recall's start-up)
if TYPE_CHECKING:
    from typing import Any

_RANKS = (*LIFECYCLE_RANK.values(), 5, 6, 7, 8, 9)  # every rank a row can have
_MAX_RANGES = 48  # more rowid ranges than this: join the keys instead
_MAX_ANCHOR_TERMS = 400  # more anchors than this in a MATCH expression: join the keys instead


@dataclass(frozen=True, slots=True)
class Candidate:
    """One stored row: every column plus its MAC."""

    values: tuple[Any, ...]  # ROW_COLUMNS order
    mac: str

    @property
    def id(self) -> str:
        """The memory ID."""
        return str(self.values[0])

    @property
    def content_bytes(self) -> int:
        """Length of the JSON encoding of ``data.content`` (recall's budget)."""
        return int(self.values[COLUMN["content_bytes"]])

    @property
    def data_bytes(self) -> int:
        """Length of the JSON encoding of the whole ``data`` object (grep's budget)."""
        return int(self.values[COLUMN["data_bytes"]])

    @property
    def deps(self) -> bytes:
        """The JSON list of the row's lifecycle-target dependencies."""
        return bytes(self.values[COLUMN["deps"]])


_COLUMNS = ", ".join("r." + c for c in ROW_COLUMNS)


@dataclass(frozen=True, slots=True)
class Selection:
    """The context-free filters of a request: lifecycle ranks (empty: any) and the ``terms``
    expression of its topic, term, path and subject filters ("" when there are none)."""

    ranks: tuple[int, ...]
    match: str


def selection(
    *, lifecycles: Sequence[str], topics: Sequence[str], tokens: Sequence[str], path: str,
    subject: str,
) -> Selection:  # fmt: skip
    """The :class:`Selection` of a normalised request's filters."""
    return Selection(
        tuple(LIFECYCLE_RANK[v] for v in lifecycles),
        match_query(topics=topics, tokens=tokens, path=path, subject=subject),
    )


@dataclass(frozen=True, slots=True)
class View:
    """What applies at one query context (see :mod:`palimpsest.hn.recall.context`).

    ``classes``: the row classes (actor slot × kind) the kind, actor and trust filters admit
    (None: every class).  Descendants rows apply under every anchor but ``desc_except`` or, when
    ``desc_only`` is not None, only under those; each is ``(anchor ID, commit)`` pairs.
    ``exact``: the query commit's anchor when exact rows are anchored there.  ``subject``: a
    subject filter is given, so subject rows apply (the postings require the subject).
    ``live`` is False when the query commit is missing or not a commit: nothing applies.
    """

    live: bool
    classes: frozenset[int] | None
    desc_except: tuple[tuple[int, str], ...] = ()
    desc_only: tuple[tuple[int, str], ...] | None = None
    exact: tuple[int, str] | None = None
    subject: bool = False

    @property
    def plain(self) -> bool:
        """Only descendants rows apply, under every anchor (the usual recall at ``HEAD``)."""
        return (
            self.live and not self.desc_except and self.desc_only is None
            and self.exact is None and not self.subject
        )  # fmt: skip


def _marks(values: Sequence[Any]) -> str:
    return ",".join("?" * len(values))


def _class_filter(sel: Selection, view: View) -> tuple[list[str], list[Any]]:
    """The eligibility, lifecycle and class filters over ``row_keys k``."""
    clauses = ["k.eligible = 1"]
    args: list[Any] = []
    if sel.ranks:
        clauses.append(f"k.lifecycle_rank IN ({_marks(sel.ranks)})")
        args += sel.ranks
    if view.classes is not None:
        classes = sorted(view.classes)
        clauses.append(f"k.cls IN ({_marks(classes)})")
        args += classes
    return clauses, args


def _key_filter(sel: Selection, view: View) -> tuple[str, list[Any]]:
    """The eligibility, lifecycle, class and applicability filters over ``row_keys k``."""
    clauses, args = _class_filter(sel, view)
    modes: list[str] = []
    if view.desc_only is not None:
        if view.desc_only:
            aids = [aid for aid, _ in view.desc_only]
            modes.append(f"(k.mode = {DESCENDANTS} AND k.aid IN ({_marks(aids)}))")
            args += aids
    elif view.desc_except:
        aids = [aid for aid, _ in view.desc_except]
        modes.append(f"(k.mode = {DESCENDANTS} AND k.aid NOT IN ({_marks(aids)}))")
        args += aids
    else:
        modes.append(f"k.mode = {DESCENDANTS}")
    if view.exact is not None:
        modes.append(f"(k.mode = {EXACT} AND k.aid = ?)")
        args.append(view.exact[0])
    if view.subject:
        modes.append(f"k.mode = {SUBJECT}")
    clauses.append("(" + (" OR ".join(modes) or "0") + ")")
    return " AND ".join(clauses), args


def _rows_under(
    index: MemoryIndex,
    sel: Selection,
    view: View,
    mode: int,
    anchors: Sequence[tuple[int, str]],
) -> int:
    """How many eligible rows of ``mode`` anchored at ``anchors`` pass the filters: through
    the anchor postings with the other postings (a few anchors), the matches of the postings
    (many), or the rows of those anchors when no postings are asked (a covering index)."""
    if not anchors:
        return 0
    clauses, args = _class_filter(sel, view)
    clauses.append("k.mode = ?")
    args.append(mode)
    if sel.match and len(anchors) <= _MAX_ANCHOR_TERMS:
        match = _both(sel.match, any_anchor(c for _, c in anchors))
        sql = "SELECT count(*) FROM terms f CROSS JOIN row_keys k ON k.doc = f.rowid"
        return int(index.conn.execute(
            f"{sql} WHERE f.terms MATCH ? AND {' AND '.join(clauses)}",
            (match, *args),
        ).fetchone()[0])  # fmt: skip
    aids = [aid for aid, _ in anchors]
    clauses.append(f"k.aid IN ({_marks(aids)})")
    args += aids
    if sel.match:
        sql = "SELECT count(*) FROM terms f CROSS JOIN row_keys k ON k.doc = f.rowid"
        return int(index.conn.execute(
            f"{sql} WHERE f.terms MATCH ? AND {' AND '.join(clauses)}",
            (sel.match, *args),
        ).fetchone()[0])  # fmt: skip
    return int(index.conn.execute(
        "SELECT count(*) FROM row_keys k INDEXED BY row_keys_anchor"  # noqa: S608
        f" WHERE {' AND '.join(clauses)}",
        args,
    ).fetchone()[0])  # fmt: skip


def _ranges(mode: int, sel: Selection, view: View) -> list[tuple[int, int]] | None:
    """The ``terms`` document ID ranges of the eligible rows of ``mode`` that pass the
    lifecycle and class filters; None when they would be too many (join the keys instead)."""
    classes = sorted(view.classes) if view.classes is not None else None
    runs: list[list[int]] = []
    for rank in sel.ranks or _RANKS:
        if classes is None:
            first = doc_group(mode, rank, 0)
            pairs = [(first, doc_group(mode, rank + 1, 0) - 1)]
        else:
            pairs = [(doc_group(mode, rank, c), doc_group(mode, rank, c)) for c in classes]
        for low, high in pairs:
            if runs and runs[-1][1] == low - 1:
                runs[-1][1] = high
            else:
                runs.append([low, high])
        if len(runs) > _MAX_RANGES:
            return None
    return [group_range(low, high) for low, high in runs]


def _fts_count(index: MemoryIndex, match: str, ranges: Sequence[tuple[int, int]]) -> int:
    total = 0
    for low, high in ranges:
        row = index.conn.execute(
            "SELECT count(*) FROM terms WHERE terms MATCH ? AND rowid BETWEEN ? AND ?",
            (match, low, high),
        ).fetchone()
        total += int(row[0])
    return total


def _both(match: str, extra: str) -> str:
    return f"{match} AND {extra}" if match else extra


def _totals(index: MemoryIndex, sel: Selection, view: View, modes: Sequence[int]) -> list[Any]:
    """The MAC-checked per-class totals of ``modes`` that pass the lifecycle and class
    filters: ``(mode, rank, cls, n, max_content, max_data, units)`` each.

    Raises:
        IndexTampered: a total failed its integrity check.
    """
    out = []
    sql = f"SELECT * FROM groups WHERE mode IN ({_marks(modes)})"  # noqa: S608
    args: list[Any] = list(modes)
    if sel.ranks:
        sql += f" AND lifecycle_rank IN ({_marks(sel.ranks)})"
        args += sel.ranks
    for *values, mac in index.conn.execute(sql, args):
        if view.classes is not None and int(values[2]) not in view.classes:
            continue
        if not index.valid(values, str(mac)):
            raise IndexTampered("groups")
        out.append(values)
    return out


def _modes(view: View) -> list[int]:
    modes = [DESCENDANTS] if view.desc_only is None or view.desc_only else []
    if view.exact is not None:
        modes.append(EXACT)
    if view.subject:
        modes.append(SUBJECT)
    return modes


def count_and_biggest(
    index: MemoryIndex, sel: Selection, view: View, column: str
) -> tuple[int, int]:
    """The number of eligible rows (exact) and an upper bound of ``column`` (``content_bytes``
    or ``data_bytes``) over them: the largest in the classes they can be in.

    Raises:
        IndexTampered: a total failed its integrity check.
    """
    if not view.live:
        return 0, 0
    totals = _totals(index, sel, view, _modes(view))
    pick = 4 if column == "content_bytes" else 5
    bound = max((int(v[pick]) for v in totals), default=0)
    found = _fast_count(index, sel, view, totals)
    if found is not None:
        return found, bound
    where, args = _key_filter(sel, view)
    if sel.match:
        row = index.conn.execute(
            f"SELECT count(*) FROM terms f CROSS JOIN row_keys k ON k.doc = f.rowid"  # noqa: S608
            f" WHERE f.terms MATCH ? AND {where}",
            (sel.match, *args),
        ).fetchone()
    else:
        row = index.conn.execute(
            f"SELECT count(*) FROM row_keys k WHERE {where}",  # noqa: S608
            args,
        ).fetchone()
    return int(row[0]), bound


def count(index: MemoryIndex, sel: Selection, view: View) -> int:
    """The number of eligible rows (exact).

    Raises:
        IndexTampered: a total failed its integrity check.
    """
    return count_and_biggest(index, sel, view, "content_bytes")[0]


def _fast_count(
    index: MemoryIndex, sel: Selection, view: View, totals: Sequence[Any]
) -> int | None:
    """The count from FTS5 rowid ranges, the totals (``totals``: :func:`_totals` of the view's
    modes) and the rows of the anchors the view lists; None when that would not be cheap."""
    total = 0
    only, excluded = view.desc_only, view.desc_except
    if only is not None:
        total += _rows_under(index, sel, view, DESCENDANTS, only)
    else:
        if sel.match:
            desc = _ranges(DESCENDANTS, sel, view)
            if desc is None:
                return None
            total += _fts_count(index, sel.match, desc)
        else:
            total += sum(int(v[3]) for v in totals if int(v[0]) == DESCENDANTS)
        total -= _rows_under(index, sel, view, DESCENDANTS, excluded)
    if view.exact is not None:
        total += _rows_under(index, sel, view, EXACT, (view.exact,))
    if view.subject:
        subject = _ranges(SUBJECT, sel, view)
        if subject is None or not sel.match:
            return None
        total += _fts_count(index, sel.match, subject)
    return total


def _eligible_total(index: MemoryIndex, sel: Selection, view: View) -> int:
    # Only a cost estimate (never an answer), so the totals' MACs are not checked here.
    sql = "SELECT lifecycle_rank, cls, n FROM groups"
    total = 0
    for rank, cls, n in index.conn.execute(sql):
        if (not sel.ranks or int(rank) in sel.ranks) and (
            view.classes is None or int(cls) in view.classes
        ):
            total += int(n)
    return total


_KEY_ORDER = " ORDER BY k.lifecycle_rank, k.timestamp DESC, k.id"

# Measured in SQLite VM instructions at 100k (docs/benchmarks.md): a walk costs about 5 per
# match (the match list it probes) plus 15 per key it visits, about (eligible rows x page size
# / matches) keys; the sort costs about 19 per match.  So walking wins when it visits fewer keys
# than there are matches.
_WALK_COST = 1
_TICK = 1000  # VM instructions between two looks at a walk's budget


def _walk_budget(index: MemoryIndex, sel: Selection, view: View, matched: int, limit: int) -> int:
    """The VM instructions a walk for this page may use; 0 when sorting the matches is cheaper.

    Matches crowded at the far end of the order would make a walk long: past twice its expected
    cost it is interrupted and the matches are sorted instead.
    """
    if len(sel.ranks) > 1 or not matched:
        return 0
    visits = _eligible_total(index, sel, view) * limit // matched + 1
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


def _after(after: tuple[int, str, str] | None) -> tuple[str, list[Any]]:
    """The cursor's "strictly after this position" in recall order over ``row_keys k``."""
    if after is None:
        return "", []
    rank, stamp, mid = after
    clause = (
        " AND (k.lifecycle_rank > ? OR (k.lifecycle_rank = ? AND"
        " (k.timestamp < ? OR (k.timestamp = ? AND k.id > ?))))"
    )
    return clause, [rank, rank, stamp, stamp, mid]


def page(
    index: MemoryIndex,
    sel: Selection,
    view: View,
    *,
    matched: int,
    after: tuple[int, str, str] | None,
    limit: int,
) -> list[str]:
    """The IDs of up to ``limit`` eligible rows after ``after`` in §16.4 order (``matched`` is
    the eligible count, for the walk-or-sort choice)."""
    if not view.live or not matched or limit < 1:
        return []
    where, args = _key_filter(sel, view)
    after_sql, after_args = _after(after)
    member, member_args = "", []
    if sel.match:
        member, member_args = " AND k.doc IN (SELECT rowid FROM terms WHERE terms MATCH ?)", [
            sel.match
        ]
    budget = _walk_budget(index, sel, view, matched, limit)
    if budget:
        walked = _within(
            index,
            budget,
            f"SELECT k.id FROM row_keys k INDEXED BY row_keys_walk WHERE {where}{after_sql}"  # noqa: S608
            f"{member}{_KEY_ORDER} LIMIT ?",
            (*args, *after_args, *member_args, limit),
        )
        if walked is not None:
            return [str(row[0]) for row in walked]
    if sel.match:
        sql = (
            f"SELECT k.id FROM terms f CROSS JOIN row_keys k ON k.doc = f.rowid"  # noqa: S608
            f" WHERE f.terms MATCH ? AND {where}{after_sql}{_KEY_ORDER} LIMIT ?"
        )
        params: tuple[Any, ...] = (sel.match, *args, *after_args, limit)
    elif view.desc_only is not None:
        # Few anchors apply: gather their rows by anchor and sort them.
        sql = (
            f"SELECT k.id FROM row_keys k WHERE {where}"  # noqa: S608
            f"{after_sql}{_KEY_ORDER} LIMIT ?"
        )
        params = (*args, *after_args, limit)
    else:
        sql = (
            f"SELECT k.id FROM row_keys k INDEXED BY row_keys_walk WHERE {where}"  # noqa: S608
            f"{after_sql}{_KEY_ORDER} LIMIT ?"
        )
        params = (*args, *after_args, limit)
    return [str(r[0]) for r in index.conn.execute(sql, params)]


def _eligible_keys(sel: Selection, view: View, extra: str = "") -> tuple[str, list[Any]]:
    """``FROM … WHERE …`` of every eligible key (joined to its matches when postings are
    asked)."""
    where, args = _key_filter(sel, view)
    if sel.match:
        return (
            f" FROM terms f CROSS JOIN row_keys k ON k.doc = f.rowid{extra}"
            f" WHERE f.terms MATCH ? AND {where}",
            [sel.match, *args],
        )
    return f" FROM row_keys k INDEXED BY row_keys_walk{extra} WHERE {where}", args


def sum_search_units(index: MemoryIndex, sel: Selection, view: View) -> int:
    """``Σ(fieldUTF8Bytes + 1)`` over the grep surface of every eligible row.

    Raises:
        IndexTampered: a total failed its integrity check.
    """
    if not view.live:
        return 0
    if view.plain and not sel.match:
        return sum(int(v[6]) for v in _totals(index, sel, view, [DESCENDANTS]))
    source, args = _eligible_keys(sel, view)
    row = index.conn.execute(f"SELECT coalesce(sum(k.search_units), 0){source}", args).fetchone()
    return int(row[0])


def scan_fields(index: MemoryIndex, sel: Selection, view: View) -> Iterator[tuple[str, int, bytes]]:
    """``(id, data_bytes, fields JSON)`` of every eligible row in recall order (for grep).

    Unverified: grep re-checks the rows it returns against their MAC-verified values.
    """
    if not view.live:
        return
    source, args = _eligible_keys(sel, view, " CROSS JOIN rows r ON r.id = k.id")
    sql = f"SELECT r.id, r.data_bytes, r.fields{source}{_KEY_ORDER}"
    for mid, data_bytes, fields in index.conn.execute(sql, args):
        yield str(mid), int(data_bytes), bytes(fields)


def candidates(index: MemoryIndex, sel: Selection, view: View) -> Iterator[Candidate]:
    """Every eligible row in §16.4 order (to name the first that is over a byte bound)."""
    if not view.live:
        return
    source, args = _eligible_keys(sel, view, " CROSS JOIN rows r ON r.id = k.id")
    for *values, mac in index.conn.execute(f"SELECT {_COLUMNS}, r.mac{source}{_KEY_ORDER}", args):
        yield Candidate(tuple(values), str(mac))


def rows_by_id(index: MemoryIndex, ids: Sequence[str]) -> list[Candidate]:
    """The full rows of ``ids``, in the order given."""
    if not ids:
        return []
    found = {
        str(values[0]): Candidate(tuple(values), str(mac))
        for *values, mac in index.conn.execute(
            f"SELECT {_COLUMNS}, r.mac FROM rows r WHERE r.id IN ({_marks(ids)})",  # noqa: S608
            tuple(ids),
        )
    }
    return [found[i] for i in ids if i in found]


def position_after(
    index: MemoryIndex, sel: Selection, view: View, memory: str
) -> tuple[int, str, str] | None:
    """The sort key of ``memory`` if it is in the eligible set."""
    if not view.live:
        return None
    where, args = _key_filter(sel, view)
    sql = f"SELECT k.lifecycle_rank, k.timestamp, k.id FROM row_keys k WHERE k.id = ? AND {where}"  # noqa: S608
    params: list[Any] = [memory, *args]
    if sel.match:
        sql += " AND k.doc IN (SELECT rowid FROM terms WHERE terms MATCH ?)"
        params.append(sel.match)
    row = index.conn.execute(sql, params).fetchone()
    return None if row is None else (int(row[0]), str(row[1]), str(row[2]))


def anchor_ids(index: MemoryIndex, commits: Sequence[str]) -> dict[str, int]:
    """Anchor IDs of ``commits`` (those anchored at all), unverified: for cost estimates and the
    page check, which compares with MAC-checked rows."""
    out: dict[str, int] = {}
    for start in range(0, len(commits), 500):
        chunk = list(commits[start : start + 500])
        for aid, commit in index.conn.execute(
            f"SELECT aid, commit_id FROM anchors WHERE commit_id IN ({_marks(chunk)})",  # noqa: S608
            chunk,
        ):
            out[str(commit)] = int(aid)
    return out


__all__ = [
    "Candidate",
    "Selection",
    "View",
    "anchor_ids",
    "candidates",
    "count",
    "count_and_biggest",
    "page",
    "position_after",
    "rows_by_id",
    "scan_fields",
    "selection",
    "sum_search_units",
]
