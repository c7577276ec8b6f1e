"""The answers of ``recall`` and ``grep`` over an open, current index: bounded, deterministic
pages of verified memories (§16, §23), and the version-0 envelope.

Both select the eligible rows — applicable at the query commit, evidence resolved, then the
request's filters (:mod:`palimpsest.hn.recall.context` judges the context) — order them
(lifecycle rank, signed timestamp descending as a string, memory ID), and return one page
bounded by record count and bytes.  Records are atomic: if any match exceeds the byte bound
the call fails before a page is built.  :mod:`palimpsest.hn.recall.run` opens the index and
calls these.

Output is the version-0 envelope with the constant warning outside author data; author prose
stays under ``memories[].data``.  Human output neutralises control, bidi and invisible
characters (``palimpsest.text``) and never emits an ESC byte.

Nothing here writes Git: no fetch, no ref update, no event append.  The only write is the
disposable index below ``.git/hn/memory``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace

from palimpsest.canonical import encode
from palimpsest.errors import InvalidInput
from palimpsest.hn.index.core import MemoryIndex
from palimpsest.hn.index.query import (
    Candidate,
    candidates,
    count,
    count_and_biggest,
    page,
    position_after,
    rows_by_id,
    scan_fields,
    sum_search_units,
)
from palimpsest.hn.index.schema import (
    COLUMN,
    IndexTampered,
    recall_json,
    row_data,
    search_fields,
)
from palimpsest.hn.recall.context import QueryContext, context_for
from palimpsest.hn.recall.request import (
    WARNING,
    GrepSpec,
    RecallRequest,
    decode_cursor,
    encode_cursor,
    query_digest,
)
from palimpsest.text import safe_line, safe_text

TYPE_CHECKING = False  # typing stays unimported at run time (the warm recall's start-up)
if TYPE_CHECKING:
    from typing import Any

    from palimpsest.hn.recall.context import Judge
    from palimpsest.search.regex import CompiledPattern


@dataclass(frozen=True, slots=True)
class LeftOut:
    """How many more memories a recall would have matched without its trust filter, without
    its lifecycle filter, and only without both (for human output; never in the JSON)."""

    trust: int = 0
    lifecycle: int = 0
    both: int = 0

    def line(self) -> str:
        """``Left out: …`` naming the flags that show them, or "" when nothing was left out."""
        parts = []
        if self.trust:
            parts.append(f"{self.trust} by trust (--include-untrusted)")
        if self.lifecycle:
            parts.append(f"{self.lifecycle} by lifecycle (--lifecycle all)")
        if self.both:
            parts.append(f"{self.both} by both (--include-untrusted --lifecycle all)")
        return ("Left out: " + "; ".join(parts)) if parts else ""


@dataclass(frozen=True, slots=True)
class RecallResult:
    """One page: the envelope fields plus, for grep, the matching fields of each record."""

    query_digest: str
    matched: int
    truncated: bool
    next_cursor: str
    records: tuple[bytes, ...]  # exact JSON of each returned record
    missing_dependencies: tuple[dict[str, Any], ...]
    matches: tuple[tuple[tuple[str, str], ...], ...] = field(default=())
    left_out: LeftOut | None = None

    def to_json(self) -> bytes:
        """The compact version-0 envelope followed by one LF (§16.6)."""
        head: dict[str, Any] = {
            "version": 0,
            "warning": WARNING,
            "queryDigest": self.query_digest,
            "matched": self.matched,
            "returned": len(self.records),
            "truncated": self.truncated,
        }
        if self.next_cursor:
            head["nextCursor"] = self.next_cursor
        opening = encode(head)[:-1]
        return b"".join(
            (
                opening,
                b',"memories":[',
                b",".join(self.records),
                b'],"missingDependencies":',
                encode(list(self.missing_dependencies)),
                b"}\n",
            )
        )

    def to_human(self) -> str:
        """Human output: the warning, counts, what the filters left out, one header per
        record, escaped author text."""
        lines = [
            WARNING,
            f"Matched: {self.matched}; returned: {len(self.records)}; "
            f"truncated: {'true' if self.truncated else 'false'}",
        ]
        if self.left_out is not None and self.left_out.line():
            lines.append(self.left_out.line())
        for position, raw in enumerate(self.records):
            record = json.loads(raw)
            lines.append(
                f"{record['id']}  actor={record['actor']}  kind={record['kind']}  "
                f"lifecycle={record['lifecycle']}  applicability={record['applicability']}  "
                f"evidence={record['evidence']}  trust={record['trust']}"
            )
            if self.matches:
                for label, value in self.matches[position]:
                    lines.append(f"  {label}: {safe_line(value)}")
            else:
                content = safe_text(record["data"]["content"])
                lines.extend("  " + line for line in content.split("\n"))
        if self.next_cursor:
            lines.append(f"Next cursor: {self.next_cursor}")
        return "\n".join(lines) + "\n"


_Tampered = IndexTampered  # a row or total failed its integrity check: rebuild, answer again


def _checked(
    index: MemoryIndex, context: QueryContext, rows: list[Candidate]
) -> list[Candidate]:
    # The MAC proves each row is ours; the filter check proves the unauthenticated keys that
    # chose it did not smuggle in a row the filters or the query context exclude.
    for cand in rows:
        if not index.valid(cand.values, cand.mac):
            raise _Tampered(cand.id)
    anchors = index.anchors_at(str(c.values[COLUMN["anchor"]]) for c in rows)
    for cand in rows:
        if not context.admits(cand.values, anchors):
            raise _Tampered(cand.id)
    return rows


def _too_big(memory: str, what: str) -> InvalidInput:
    return InvalidInput(
        f"memory {memory} encoded {what} exceeds maxContentBytes; raise the explicit bound",
        code="record-exceeds-bound",
    )


def _dependencies(page: list[Candidate]) -> tuple[dict[str, Any], ...]:
    seen: dict[bytes, dict[str, Any]] = {}
    for cand in page:
        for dep in json.loads(cand.deps):
            seen[encode(dep)] = dep
    key = ("missingId", "kind", "operation", "ownerId", "stream", "reason")
    return tuple(sorted(seen.values(), key=lambda d: tuple(d.get(k, "") for k in key)))


def _cursor_error(what: str) -> InvalidInput:
    return InvalidInput(
        f"{what} cursor no longer names a result in this query", code="invalid-cursor"
    )


def _page(
    rows: list[Candidate], size_of: str, request: RecallRequest
) -> tuple[list[Candidate], bool]:
    """Fill one page from ``rows`` (already after the cursor) within both bounds."""
    page: list[Candidate] = []
    used = 0
    for cand in rows:
        size = cand.content_bytes if size_of == "content" else cand.data_bytes
        if len(page) >= request.max_records or used + size > request.max_content_bytes:
            break
        page.append(cand)
        used += size
    return page, len(page) < len(rows)


def answer_recall(
    index: MemoryIndex, judge: Judge, request: RecallRequest, *, explain: bool
) -> RecallResult:
    """Answer a normalised recall request over an open, current index (§16); ``explain`` also
    counts what the trust and lifecycle filters left out (for human output).

    Raises:
        InvalidInput: bad cursor, a record larger than the byte bound, an invalid policy.
        IndexTampered: a row failed its integrity check (rebuild and answer again).
        NotKept: ``judge`` keeps no answer for the query commit.
    """
    context = context_for(judge, index, request, lexical=True)
    digest = query_digest(request, context.source_fingerprint, context.policy.digest)
    sel, view = context.selection, context.view
    after = None
    if request.cursor:
        last = decode_cursor(request.cursor, digest)
        after = position_after(index, sel, view, last)
        if after is None:
            raise _cursor_error("recall")
    matched, largest = count_and_biggest(index, sel, view, "content_bytes")
    if largest > request.max_content_bytes:
        for cand in candidates(index, sel, view):
            if cand.content_bytes > request.max_content_bytes:
                raise _too_big(cand.id, "content")
    ids = page(index, sel, view, matched=matched, after=after, limit=request.max_records + 1)
    fetched = rows_by_id(index, ids)
    rows, truncated = _page(fetched, "content", request)
    rows = _checked(index, context, rows)
    if fetched and not rows:  # the first record alone exceeds the bound: stale totals
        raise _too_big(fetched[0].id, "content")
    cursor = encode_cursor(digest, rows[-1].id) if truncated and rows else ""
    return RecallResult(
        digest,
        matched,
        truncated,
        cursor,
        tuple(recall_json(c.values, context.trust(c.values)) for c in rows),
        _dependencies(rows),
        left_out=_left_out(judge, index, request, matched) if explain else None,
    )


def _left_out(
    judge: Judge, index: MemoryIndex, request: RecallRequest, matched: int
) -> LeftOut:
    """What the trust and lifecycle filters of ``request`` left out (counts only)."""

    def matched_without(*, trust: bool, lifecycle: bool) -> int:
        wider = replace(
            request,
            trust=() if trust else request.trust,
            lifecycle=() if lifecycle else request.lifecycle,
        )
        context = context_for(judge, index, wider, lexical=True)
        return count(index, context.selection, context.view)

    by_trust = matched_without(trust=True, lifecycle=False) - matched if request.trust else 0
    by_life = (
        matched_without(trust=False, lifecycle=True) - matched if request.lifecycle else 0
    )
    both = 0
    if request.trust and request.lifecycle:
        both = matched_without(trust=True, lifecycle=True) - matched - by_trust - by_life
    return LeftOut(by_trust, by_life, both)


def _field_matches(pattern: CompiledPattern, cand: Candidate) -> tuple[tuple[str, str], ...]:
    data = row_data(cand.values)
    return tuple(
        (label, value)
        for label, value in search_fields(data)
        if pattern.matches(value.encode("utf-8"))
    )


def answer_grep(
    index: MemoryIndex, judge: Judge, request: RecallRequest, pattern: CompiledPattern
) -> RecallResult:
    """Explicit regex search over the eligible selection of an open, current index (§23):
    the work limit is checked over the whole selection before matching.

    Raises:
        InvalidInput: the work limit, a bad cursor or an oversized record.
        IndexTampered: a row failed its integrity check (rebuild and answer again).
    """
    from palimpsest.search.regex import check_work  # noqa: PLC0415 - RE2 only for grep

    spec = GrepSpec(pattern.pattern.decode("utf-8"), pattern.ignore_case)
    context = context_for(judge, index, request, lexical=False)
    digest = query_digest(request, context.source_fingerprint, context.policy.digest, spec)
    last = decode_cursor(request.cursor, digest, grep=True) if request.cursor else ""
    sel, view = context.selection, context.view
    check_work(pattern.instructions, sum_search_units(index, sel, view))
    hits: list[tuple[str, int]] = []
    for mid, data_bytes, fields in scan_fields(index, sel, view):
        values = json.loads(fields)
        if any(pattern.matches(value.encode("utf-8")) for value in values):
            hits.append((mid, data_bytes))
    for mid, data_bytes in hits:
        if data_bytes > request.max_content_bytes:
            raise _too_big(mid, "data")
    start = 0
    if last:
        ids = [mid for mid, _ in hits]
        if last not in ids:
            raise _cursor_error("grep")
        start = ids.index(last) + 1
    page_ids: list[str] = []
    used = 0
    for mid, data_bytes in hits[start:]:
        if (
            len(page_ids) >= request.max_records
            or used + data_bytes > request.max_content_bytes
        ):
            break
        page_ids.append(mid)
        used += data_bytes
    truncated = start + len(page_ids) < len(hits)
    rows = _checked(index, context, rows_by_id(index, page_ids))
    matches = [_field_matches(pattern, cand) for cand in rows]
    if len(rows) != len(page_ids) or not all(matches):
        raise _Tampered("grep fields")  # the unverified surface disagreed with the row
    cursor = encode_cursor(digest, rows[-1].id, grep=True) if truncated and rows else ""
    return RecallResult(
        digest,
        len(hits),
        truncated,
        cursor,
        tuple(recall_json(c.values, context.trust(c.values)) for c in rows),
        _dependencies(rows),
        tuple(matches),
    )




__all__ = ["LeftOut", "RecallResult", "answer_grep", "answer_recall"]
