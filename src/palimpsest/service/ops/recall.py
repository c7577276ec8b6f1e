"""Recall of the built-in provider: the request over the caller's reach, candidates from
storage, filters and the re-rank of :mod:`palimpsest.search.rank`.

What the engine serves, stated once (and copied into the capability document):

- ``text``: ranked lexical retrieval, BM25 over SQLite FTS5 on the analysed title and content
  words (:mod:`palimpsest.search.fts` builds the quoted MATCH expression); a period the
  question names ("two weeks ago") favours records whose time lies there, counted back from
  the service clock (:mod:`palimpsest.search.timeref`);
- ``filters``: the grammar ``{field, op, value}`` | ``{and}`` | ``{or}`` over ``type``,
  ``attributes.*`` and ``time.*``, evaluated on each candidate's current version.

``query`` (meaning) is not served: it is reported as ``query:not_supported`` in ``degraded``
and its words are searched lexically instead (also reported), never silently ignored.

The reach of a recall (which memories are searched) is decided by :mod:`access` before any of
this runs; nothing here widens it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final

from palimpsest.search import bm25, rank, spelling
from palimpsest.search.analyzer import analyze, query_words
from palimpsest.service import mounts, providers, wire
from palimpsest.service.core import Core
from palimpsest.service.model import Caller, RecordVersion, Wire
from palimpsest.service.ops.tree import navigation
from palimpsest.service.wire import AllOf, AnyOf, Cond, Filter, RecallRequest

ASKABLE_SIGNALS: Final = ("query", "text", "filters")
Admit = Callable[[RecordVersion], bool]
SCAN_CAP: Final = 5000  # candidates examined per recall before reporting a partial scan


POSTINGS_BOUND: Final = 1000


def bounded_terms(terms: Sequence[str], dfs: Mapping[str, int]) -> tuple[list[str], bool]:
    """The terms whose postings the BM25 pass ranks, and whether even those exceed the bound.

    Terms no record holds are dropped. Rarest first, terms are kept while their summed document
    frequency stays within :data:`POSTINGS_BOUND`; the rarest is always kept. When it alone is
    above the bound, storage ranks only its newest matches (``bounded``).
    """
    present = sorted((t for t in dict.fromkeys(terms) if dfs.get(t, 0) > 0),
                     key=lambda t: (dfs[t], t))
    kept: list[str] = []
    total = 0
    for t in present:
        if kept and total + dfs[t] > POSTINGS_BOUND:
            break
        kept.append(t)
        total += dfs[t]
    return kept, total > POSTINGS_BOUND


def search_words(req: RecallRequest) -> list[tuple[str, str]]:
    """``(word, analysed term)`` pairs of the lexical search: ``text``, and ``query`` words as
    a fallback."""
    raw = " ".join(x for x in (req.text, req.query) if x)
    return query_words(raw, limit=64)


def search_terms(req: RecallRequest) -> list[str]:
    """Analysed terms of the lexical search (those of :func:`search_words`)."""
    return [term for _, term in search_words(req)]


def instant(epoch_ms: int) -> datetime:
    """The service clock's reading as a UTC datetime: the "now" that relative periods in a
    question ("two weeks ago") are counted back from."""
    return datetime.fromtimestamp(epoch_ms / 1000, UTC)


def degraded_for(req: RecallRequest) -> list[str]:
    """``<signal>:not_supported`` for each asked signal the engine does not serve."""
    out: list[str] = []
    if req.query and req.query.strip():
        out.append("query:not_supported")
        out.append("query:answered_lexically")
    return out


def why(req: RecallRequest, lexical: bool) -> list[str]:
    """Which served signals matched a result."""
    out = []
    if lexical:
        out.append("text")
    if req.filters is not None:
        out.append("filters")
    return out


def lexical_score(terms: Sequence[str], text: str) -> float:
    """A small overlap score for scans without the index (``as_of`` reads)."""
    if not terms:
        return 0.0
    words = analyze(text)
    have = set(words)
    hits = sum(1 for t in set(terms) if t in have)
    return hits / math.sqrt(1 + len(words)) if hits else 0.0


# --- filters -------------------------------------------------------------------------------
_MISSING = object()


def field_value(rec: RecordVersion, name: str) -> Any:
    """Resolve a filter field on a record version (``_MISSING`` when absent)."""
    if name == "type":
        return rec.body.type
    if name.startswith("time."):
        key = name[5:]
        return {"valid_from": rec.body.valid_from, "valid_to": rec.body.valid_to,
                "written_at": rec.written_at}.get(key, _MISSING)
    cur: Any = rec.body.attributes
    for part in name.split(".")[1:]:
        if not isinstance(cur, Mapping) or part not in cur:
            return _MISSING
        cur = cur[part]
    return cur


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return bool(a == b)


def _order(a: Any, b: Any) -> int | None:
    num = (int, float)
    if isinstance(a, num) and isinstance(b, num) and not isinstance(a, bool) \
            and not isinstance(b, bool):
        return (a > b) - (a < b)
    if isinstance(a, str) and isinstance(b, str):
        return (a > b) - (a < b)
    return None


def matches(f: Filter, rec: RecordVersion) -> bool:
    """Evaluate a filter expression on one record version."""
    if isinstance(f, AllOf):
        return all(matches(x, rec) for x in f.items)
    if isinstance(f, AnyOf):
        return any(matches(x, rec) for x in f.items)
    return _cond(f, rec)


def _cond(c: Cond, rec: RecordVersion) -> bool:
    v = field_value(rec, c.field)
    if c.op == "exists":
        return (v is not _MISSING and v is not None) == (c.value is not False)
    if v is _MISSING:
        return c.op == "ne"
    if c.op == "eq":
        return _same(v, c.value)
    if c.op == "ne":
        return not _same(v, c.value)
    if c.op == "in":
        return any(_same(v, x) for x in c.value)
    if c.op == "contains":
        if isinstance(v, str) and isinstance(c.value, str):
            return c.value.lower() in v.lower()
        if isinstance(v, list):
            return any(_same(x, c.value) for x in v)
        return False
    cmp = _order(v, c.value)
    if cmp is None:
        return False
    return {"gte": cmp >= 0, "lte": cmp <= 0, "gt": cmp > 0, "lt": cmp < 0}[c.op]


# --- recall --------------------------------------------------------------------------------
def recall(core: Core, caller: Caller, memory_id: str, body: Wire,
           admit: Admit | None = None) -> Wire:
    """``POST /v1/memories/{id}/recall`` over the readable subtree; ``admit``: what else a
    record must satisfy (the provenance filter of :mod:`palimpsest.service.provenance.trust`),
    applied with the filters, before ranking cuts the answer."""
    req = wire.recall_request(body)
    with core.store.read():
        view, m = core.resolve(caller, memory_id, "read")
        reach = view.readable_reach(memory_id, req.depth)
        degraded = degraded_for(req)
        if len(reach) > providers.MAX_RECALL_MEMORIES:
            reach = reach[:providers.MAX_RECALL_MEMORIES]
            degraded.append(f"subtree:capped_at_{providers.MAX_RECALL_MEMORIES}_memories")
        # Mounted repositories in the reach (already judged readable, as every memory) are
        # asked by their own provider; the store searches the rest.
        paths = mounts.mounted(core.store, reach)
        found, partial = search(core, req, [x for x in reach if x not in paths], admit)
        if partial:
            degraded.append(f"filters:scanned_{SCAN_CAP}_candidates")
        results = [{"record": core.render(view, rec),
                    "memory": {"id": rec.memory_id, "name": view.tree.nodes[rec.memory_id].name},
                    "score": score,
                    "why": why(req, lexical)} for rec, score, lexical in found]
        out: Wire = {"object": "memory.recall", "results": results}
        out.update(navigation(core, view, m))
    # The repositories are read outside the store's snapshot (their own files, their own
    # index); a record of one names no other record, so it renders without the store.
    sources = [results]
    for mid, path in paths.items():
        recs, missing = mounts.search(
            path, mid, req, lambda rec: keeps(req, admit, rec))
        degraded += missing
        sources.append([{"record": rec.to_wire([]),
                         "memory": {"id": mid, "name": view.tree.nodes[mid].name},
                         "score": None,
                         "why": why(req, bool(mounts.asked(req).query))} for rec in recs])
    if len(sources) > 1:
        results = interleave(sources, req.limit)
        out["results"] = results
    out["degraded"] = degraded
    out["abstain"] = not results
    return out


def interleave(sources: Sequence[Sequence[Wire]], limit: int) -> list[Wire]:
    """One answer from several providers' ranked lists: the first of each, then the second of
    each, … (no score compares across providers), at most ``limit``."""
    out: list[Wire] = []
    for rank_ in range(max(len(s) for s in sources)):
        for s in sources:
            if rank_ < len(s):
                out.append(s[rank_])
    return out[:limit]


def keeps(req: wire.RecallRequest, admit: Admit | None, rec: RecordVersion) -> bool:
    """The request's filters and ``admit`` both hold for ``rec``."""
    return (req.filters is None or matches(req.filters, rec)) and (admit is None or admit(rec))


def search(core: Core, req: wire.RecallRequest, reach: list[str], admit: Admit | None = None
           ) -> tuple[list[tuple[RecordVersion, float | None, bool]], bool]:
    """Candidates → filters → re-rank → the first ``limit``; also returns whether a scan was
    cut short (reported in ``degraded``)."""
    statuses = ("active",) if req.include == "active" else ("active", "forgotten")
    terms = search_terms(req)
    wanted = req.limit
    out: list[tuple[RecordVersion, float | None, bool]] = []
    if not reach:
        return out, False
    if req.as_of is not None:
        return _scan_as_of(core, req, reach, terms, statuses, admit)
    if terms:
        return _lexical(core, req, reach, terms, statuses, admit)
    # Filters alone: newest first, in chunks, until enough match or the scan cap is reached.
    ns = core.store.newest_ns(reach, statuses, SCAN_CAP + 1)
    partial = len(ns) > SCAN_CAP
    ns = ns[:SCAN_CAP]
    for start in range(0, len(ns), 200):
        rows = core.store.current_rows(ns[start:start + 200])
        for row in sorted(rows, key=lambda r: -(r.n or 0)):
            rec = core.version(row)
            if req.types is not None and rec.body.type not in req.types:
                continue
            if req.filters is not None and keeps(req, admit, rec):
                out.append((rec, None, False))
                if len(out) == wanted:
                    return out, False
    return out, partial


def _lexical(core: Core, req: wire.RecallRequest, reach: list[str], terms: list[str],  # noqa: PLR0917
             statuses: tuple[str, ...], admit: Admit | None
             ) -> tuple[list[tuple[RecordVersion, float | None, bool]], bool]:
    """BM25 candidates (bounded, rarest terms first), filtered, re-ranked by search.rank."""
    # A word no record in reach holds is also looked for as its nearest vocabulary terms in
    # reach (weighted less): every count is of the memories searched, never of the store, so
    # neither a correction nor which terms are ranked depends on a record the caller cannot see.
    expansion = spelling.expand(search_words(req),
                                lambda ts: core.store.term_docs(list(ts), reach))
    kept, bounded = bounded_terms(expansion.names(), expansion.df)
    if not kept:
        return [], False
    want = rank.candidate_limit(req.limit)
    cands: dict[str, rank.Candidate] = {}
    loaded: dict[str, RecordVersion] = {}
    scanned = 0
    exhausted = False
    while len(cands) < want and scanned < SCAN_CAP:
        hits = core.store.search(kept, reach, statuses, req.types, want, scanned,
                                 POSTINGS_BOUND if bounded else None)
        scanned += len(hits)
        judged = req.filters is not None or admit is not None
        if judged:
            # Filters need the record itself; only then are candidates loaded before ranking.
            rows = {r.n: r for r in core.store.current_rows([h[0] for h in hits])}
        for hit in hits:
            n, key = hit.n, str(hit.n)
            if judged:
                row = rows.get(n)
                if row is None:
                    continue
                rec = core.version(row)
                if not keeps(req, admit, rec):
                    continue
                loaded[key] = rec
            cands[key] = rank.Candidate(key, hit.text, hit.score, when=hit.when,
                                        analyzed=hit.text, thread=hit.thread,
                                        context=hit.context,
                                        follows=None if hit.follows is None else str(hit.follows))
        if len(hits) < want or bounded:
            exhausted = True
            break
    # Scores storage gave count the whole store; past it, BM25 is recomputed from the reach's
    # own statistics, so records the caller cannot see never move its order.
    size = core.store.reach_size(reach)
    stats = None if size is None else bm25.Statistics(size[0], size[1], expansion.df)
    ranked = rank.rerank(req.query, list(cands.values()), limit=req.limit, text=req.text,
                         now=instant(core.now_ms()), weights=expansion.weights(),
                         statistics=stats)
    missing = [int(r.key) for r in ranked if r.key not in loaded]
    for row in core.store.current_rows(missing):
        loaded[str(row.n)] = core.version(row)
    out: list[tuple[RecordVersion, float | None, bool]] = [
        (loaded[r.key], r.score, True) for r in ranked if r.key in loaded]
    return out, not exhausted and len(out) < req.limit


def _scan_as_of(core: Core, req: wire.RecallRequest, reach: list[str], terms: list[str],  # noqa: PLR0917
                statuses: tuple[str, ...], admit: Admit | None
                ) -> tuple[list[tuple[RecordVersion, float | None, bool]], bool]:
    """``as_of`` recall reads versions current at the instant (no index holds the past)."""
    at = req.as_of or ""
    rows = core.store.list_at(reach, at, SCAN_CAP + 1)
    partial = len(rows) > SCAN_CAP
    scored: list[tuple[RecordVersion, float | None, bool]] = []
    for row in rows[:SCAN_CAP]:
        rec = core.version(row, as_of=at)
        if rec.status not in statuses or (req.types and rec.body.type not in req.types):
            continue
        if not keeps(req, admit, rec):
            continue
        if terms:
            s = lexical_score(terms, rec.body.text)
            if s > 0:
                scored.append((rec, s, True))
        else:
            scored.append((rec, None, False))
    scored.sort(key=lambda t: -(t[1] or 0.0))
    return scored[:req.limit], partial

__all__ = [name for name in dir() if not name.startswith("_")]
