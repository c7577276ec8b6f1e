"""``recall`` and ``grep``: bounded, deterministic pages of verified memories (§16, §23).

Both read the private index (brought up to date from the verified refs first), select the
eligible rows — applicable at the query commit, evidence resolved, then the request's filters —
order them (lifecycle rank, signed timestamp descending as a string, memory ID), and return one
page bounded by record count and bytes.  Records are atomic: if any match exceeds the byte
bound the call fails before a page is built.

Output is the version-0 envelope with the constant warning outside author data; author prose
stays under ``memories[].data``.  Human output neutralises control, bidi and invisible
characters (``palimpsest.text``) and never emits an ESC byte.

Nothing here writes Git: no fetch, no ref update, no event append.  The only write is the
disposable index below ``.git/hn/memory``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pygit2

from palimpsest.canonical import encode
from palimpsest.errors import InvalidInput, Unavailable
from palimpsest.hn.index import (
    IndexContext,
    IndexTampered,
    MemoryIndex,
    guarded,
    open_index,
    search_fields,
)
from palimpsest.hn.index.query import (
    Candidate,
    Selection,
    admits,
    candidates,
    count_and_max,
    position_after,
    posting_page,
    rows_by_id,
    scan_fields,
    selection,
    sum_search_units,
)
from palimpsest.hn.recall.request import (
    WARNING,
    GrepSpec,
    RecallRequest,
    decode_cursor,
    encode_cursor,
    query_digest,
)
from palimpsest.search.regex import CompiledPattern, check_work, compile_pattern
from palimpsest.text import safe_line, safe_text


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
        """Human output: the warning, counts, one header per record, escaped author text."""
        lines = [
            WARNING,
            f"Matched: {self.matched}; returned: {len(self.records)}; "
            f"truncated: {'true' if self.truncated else 'false'}",
        ]
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


def _selection_for(request: RecallRequest, *, lexical: bool) -> Selection:
    return selection(
        subject=request.subject,
        path=request.path,
        topics=request.topic,
        kinds=request.kind,
        actors=request.actor,
        lifecycles=request.lifecycle,
        trusts=request.trust,
        tokens=request.query_tokens() if lexical else (),
    )


_Tampered = IndexTampered  # a row or total failed its integrity check: rebuild, answer again


def _checked(index: MemoryIndex, sel: Selection, cand: Candidate) -> Candidate:
    # The MAC proves the row is ours; the class check proves the unauthenticated keys that
    # chose it did not smuggle in a row the filters exclude.
    if not index.row_valid(cand.values, cand.mac) or not admits(sel, cand.values):
        raise _Tampered(cand.id)
    return cand


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
    return tuple(sorted(seen.values(), key=lambda d: tuple(d[k] for k in key)))


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


def _recall_once(repo: pygit2.Repository, request: RecallRequest, rebuild: bool) -> RecallResult:
    context = IndexContext(request.at_commit, request.subject, request.path)
    with open_index(repo, context, rebuild=rebuild) as index:
        digest = query_digest(request, index.state.source_fingerprint, index.state.policy_digest)
        sel = _selection_for(request, lexical=True)
        after = None
        if request.cursor:
            last = decode_cursor(request.cursor, digest)
            after = position_after(index, sel, last)
            if after is None:
                raise _cursor_error("recall")
        limit = request.max_records + 1
        page_ids: list[str] | None = None
        if sel.match:
            matched, biggest, page_ids = posting_page(
                index, sel, "content_bytes", after=after, limit=limit,
                bound=request.max_content_bytes,
            )  # fmt: skip
        else:
            matched, biggest = count_and_max(index, sel, "content_bytes")
        if biggest > request.max_content_bytes:
            for cand in candidates(index, sel):
                if cand.content_bytes > request.max_content_bytes:
                    raise _too_big(cand.id, "content")
        if page_ids is not None:
            fetched = rows_by_id(index, page_ids)
        else:
            fetched = list(candidates(index, sel, after=after, limit=limit))
        page, truncated = _page(fetched, "content", request)
        page = [_checked(index, sel, cand) for cand in page]
        if fetched and not page:  # the first record alone exceeds the bound: stale totals
            raise _too_big(fetched[0].id, "content")
        cursor = encode_cursor(digest, page[-1].id) if truncated and page else ""
        return RecallResult(
            digest,
            matched,
            truncated,
            cursor,
            tuple(c.json for c in page),
            _dependencies(page),
        )


def recall(repo: pygit2.Repository, request: RecallRequest) -> RecallResult:
    """Answer a normalised recall request (§16).

    Raises:
        InvalidInput: bad cursor, a record larger than the byte bound, invalid policy or stream.
        Unavailable: the index could not be made trustworthy.
    """
    try:
        with guarded():
            return _recall_once(repo, request, rebuild=False)
    except _Tampered:
        try:
            with guarded():
                return _recall_once(repo, request, rebuild=True)
        except _Tampered as exc:
            raise _tamper_error() from exc


def _tamper_error() -> Unavailable:
    return Unavailable(
        "memory index corrupt: a row failed its integrity check after a rebuild",
        code="index-corrupt",
        hint="delete .git/hn/memory and retry",
    )


def _field_matches(pattern: CompiledPattern, cand: Candidate) -> tuple[tuple[str, str], ...]:
    data = json.loads(cand.json)["data"]
    return tuple(
        (label, value)
        for label, value in search_fields(data)
        if pattern.matches(value.encode("utf-8"))
    )


def _grep_once(
    repo: pygit2.Repository, request: RecallRequest, pattern: CompiledPattern, rebuild: bool
) -> RecallResult:
    context = IndexContext(request.at_commit, request.subject, request.path)
    spec = GrepSpec(pattern.pattern.decode("utf-8"), pattern.ignore_case)
    with open_index(repo, context, rebuild=rebuild) as index:
        digest = query_digest(
            request, index.state.source_fingerprint, index.state.policy_digest, spec
        )
        last = decode_cursor(request.cursor, digest, grep=True) if request.cursor else ""
        sel = _selection_for(request, lexical=False)
        check_work(pattern.instructions, sum_search_units(index, sel))
        hits: list[tuple[str, int]] = []
        for mid, data_bytes, fields in scan_fields(index, sel):
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
        page = [_checked(index, sel, cand) for cand in rows_by_id(index, page_ids)]
        matches = [_field_matches(pattern, cand) for cand in page]
        if len(page) != len(page_ids) or not all(matches):
            raise _Tampered("grep fields")  # the unverified surface disagreed with the row
        cursor = encode_cursor(digest, page[-1].id, grep=True) if truncated and page else ""
        return RecallResult(
            digest,
            len(hits),
            truncated,
            cursor,
            tuple(c.json for c in page),
            _dependencies(page),
            tuple(matches),
        )


def grep(
    repo: pygit2.Repository, request: RecallRequest, raw_pattern: bytes, *, ignore_case: bool
) -> RecallResult:
    """Explicit regex search over the verified selection (§23).

    The pattern is checked completely (UTF-8, bytes, estimate, compiled size) before the index
    is opened; the work limit is checked over the whole eligible selection before matching.

    Raises:
        InvalidInput: a refused pattern, the work limit, a bad cursor or an oversized record.
    """
    if request.query:
        raise InvalidInput("grep has no --query; use recall for lexical terms", code="usage")
    pattern = compile_pattern(raw_pattern, ignore_case=ignore_case)
    try:
        with guarded():
            return _grep_once(repo, request, pattern, rebuild=False)
    except _Tampered:
        try:
            with guarded():
                return _grep_once(repo, request, pattern, rebuild=True)
        except _Tampered as exc:
            raise _tamper_error() from exc


__all__ = ["RecallResult", "grep", "recall"]
