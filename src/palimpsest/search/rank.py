"""The final ranking of recall: FTS5 candidates in, ordered results out.

The service's storage layer runs the MATCH (see :mod:`palimpsest.search.fts`) and hands the
top candidates here, each with its stored analysed text and FTS5 ``bm25()`` score (or, with
reach statistics, the score is computed here: :mod:`palimpsest.search.bm25`). This module
adds what BM25 alone misses:

1. BM25 order (the record's own words, plus an episode's context column; storage weights);
2. coverage: the rarity-weighted share of the question's distinct terms a record holds, which
   favours a record that answers the whole question over one that repeats one word (each term
   weighted: a spelling correction counts less than a word typed exactly);
3. the orders are fused by reciprocal rank fusion (:mod:`palimpsest.search.fusion`);
4. a question that names dates ("on 1 February, 2023", "in May") adds the order of the records
   written then; one that names a relative period instead ("two weeks ago", "last Saturday";
   :mod:`timeref`) adds the records whose time (``Candidate.when``) lies nearest it, counted
   back from the recall's ``now``;
5. episodes of one conversation (``Candidate.thread``) then support each other: a session
   with several matching turns rises above a lone match, and the turns written just before
   and just after a hit (``Candidate.follows``) rise with it.

Weights were tuned on the development halves of LoCoMo and LongMemEval_S only
(bench/quality.py; docs/benchmarks.md). Tried and left out: a term-proximity signal (lowered
LoCoMo turn recall), a greedy novelty bonus for a conversation that adds question terms the
results above it lack (dev: no gain in LongMemEval session recall_all@5, a small loss at 0.5),
storing the next turn's words in an episode's context column too (dev LoCoMo turn
recall_any@5 .724 → .722; the query-time neighbours of step 5 gave .731), BM25 ``k1`` 0.9 /
1.6 and ``b`` 0.5 / 0.9 (within a question of the defaults).

Pure: no SQL, no clock, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from palimpsest.search import bm25, timeref
from palimpsest.search.analyzer import analyze, query_terms
from palimpsest.search.fusion import Signal, reciprocal_rank_fusion

DEFAULT_CANDIDATES = 100
"""How many FTS candidates the storage layer should hand over (``max(this, 4 × limit)``)."""


@dataclass(frozen=True, slots=True)
class Candidate:
    """One record found by the FTS MATCH.

    ``lexical`` is ``-bm25(...)`` as FTS5 returns it negated, so higher is better.
    """

    key: str
    text: str
    lexical: float
    when: str | None = None
    attributes: Mapping[str, Any] = field(default_factory=dict)
    analyzed: str | None = None
    """The stored FTS text (:func:`palimpsest.search.fts.document_text`); saves re-analysis."""
    thread: str | None = None
    """The conversation the record belongs to (an episode's ``attributes.session_id``, as the
    Hermes provider writes it); ``None`` falls back to ``attributes``."""
    follows: str | None = None
    """The key of the record written just before this one in its conversation (an episode's
    context source), if any: the two are neighbours."""
    context: str | None = None
    """The stored FTS context column (an episode's conversation context), for BM25 computed
    from reach statistics (:mod:`palimpsest.search.bm25`)."""


@dataclass(frozen=True, slots=True)
class Ranked:
    """One ranked result: the candidate key, its fused score, and the signals that found it."""

    key: str
    score: float
    why: tuple[str, ...]


def candidate_limit(limit: int) -> int:
    """How many FTS rows to fetch for a recall that returns ``limit`` results."""
    return max(DEFAULT_CANDIDATES, 4 * limit)


COVERAGE_WEIGHT = 1.0
"""RRF weight of the coverage order against 1.0 for BM25 (dev: LoCoMo turn any@5 .590 → .620)."""
RRF_K = 60.0
THREAD_WEIGHT = 0.3
"""Share of a thread-mate's rank score a record receives. Tuned with :data:`THREAD_K` and
:data:`THREAD_MATES` on the development halves: (0.3, 5, 2) against the earlier (0.2, 2, all
mates) raised LongMemEval_S session recall_all@5 .880 → .885 and turn recall_all@5 .620 →
.625 and kept LoCoMo (turn recall_any@5 .693 → .695); 0.2 and 0.4, K 2 and 10, three mates
were no better, and supporting by fused score instead of rank lifted LongMemEval (.894) but
cost LoCoMo turn recall_any@5 1–3 points."""
THREAD_K = 5.0
"""Rank discount for thread support, ``1/(THREAD_K + rank)``: sharp, so only the top counts."""
THREAD_MATES = 2
"""How many of a record's best thread-mates support it."""
THREAD_ATTRIBUTE = "session_id"
NEIGHBOUR_WEIGHT = 0.2
"""Share of the better neighbour's score a record receives (:func:`_neighbour_support`). Dev:
LoCoMo turn recall_any@5 .724 → .731 (0.1: .725, 0.3: .729; neighbours two or more turns away
added nothing); LongMemEval_S unchanged."""
TIME_WEIGHT = 2.0
"""RRF weight of the "nearest the named period" order (dev, LongMemEval_S: session
recall_all@5 .870 → .880, common recall_any@5 .978 → .987; 1.0 gave .875, 3.0 the same as 2.0;
LoCoMo questions name no such period and do not move). Periods spanning up to now ("in the
past month") were tried and left out: they lowered recall_all@5 (.870 → .851)."""
DATE_WEIGHT = 2.0
"""RRF weight of the order of records inside the dates a question names (a day, a month, a
year: :func:`timeref.dates`). Dev, LoCoMo turn recall_any@5 .720 → .724 against 0 (1.0 and 3.0
within a question of it); LongMemEval_S unchanged once a date's records keep the words' order
(ordered by nearness instead, a record written a day after "in June" fell below every June
record and one multi-session question lost its second session)."""


def _idf(terms: Sequence[str], bags: Sequence[set[str]]) -> dict[str, float]:
    """Rarity of each query term among the candidates (0 for a term none of them holds)."""
    n = len(bags)
    out: dict[str, float] = {}
    for term in terms:
        df = sum(1 for bag in bags if term in bag)
        out[term] = math.log(1.0 + (n - df + 0.5) / (df + 0.5)) if df else 0.0
    return out


def _coverage(bag: set[str], idf: Mapping[str, float], weights: Mapping[str, float]) -> float:
    """Sum of the rarity of the distinct query terms a record holds, each times its weight."""
    return sum(idf[t] * weights[t] for t in bag)


def _order(candidates: Sequence[Candidate], values: Sequence[float]) -> tuple[str, ...]:
    ranked = sorted(zip(candidates, values, strict=True),
                    key=lambda cv: (-cv[1], -cv[0].lexical, cv[0].key))
    return tuple(c.key for c, v in ranked if v > 0)


def rerank(
    query: str | None,
    candidates: Sequence[Candidate],
    *,
    limit: int,
    text: str | None = None,
    now: datetime | None = None,
    weights: Mapping[str, float] | None = None,
    statistics: bm25.Statistics | None = None,
) -> list[Ranked]:
    """Order ``candidates`` for a recall with ``query`` and/or ``text``; at most ``limit``.

    ``weights`` are the analysed query terms with their weights (:mod:`spelling`: 1.0 as
    typed, less for a correction); without them the terms of ``query`` and ``text`` count 1.0
    each. ``now`` (timezone-aware) is the moment of the recall: relative periods in the
    question are counted back from it; without it they are ignored (dates are not).

    With ``statistics`` (counted over the records the recall searches, and only those) the
    BM25 order is computed here from each candidate's analysed text and context
    (:func:`bm25.scores`, weights applied) instead of taken from ``Candidate.lexical``, so the
    order never depends on records outside the reach. Keys must be unique. The result never
    contains a key that is not a candidate.
    """
    if not candidates or limit <= 0:
        return []
    name = "text" if text and not query else "query"
    asked = " ".join(x for x in (query, text) if x)
    if weights is None:
        weights = dict.fromkeys(query_terms(asked), 1.0)
    if statistics is not None:
        docs = [bm25.Document(_analysed(c), c.context or "") for c in candidates]
        computed = bm25.scores(weights, docs, statistics)
        candidates = [replace(c, lexical=v) for c, v in zip(candidates, computed, strict=True)]
    lexical = sorted(candidates, key=lambda c: (-c.lexical, c.key))
    signals = [Signal(name, tuple(c.key for c in lexical))]
    terms = list(weights)
    if terms:
        # Which query terms each candidate holds: substring tests on the space-padded analysed
        # text run in C (a CJK phrase term matches only as the phrase).
        padded = [f" {_analysed(c)} " for c in candidates]
        bags = [{t for t in terms if f" {t} " in text} for text in padded]
        idf = _idf(terms, bags)
        if COVERAGE_WEIGHT:
            cov = [_coverage(bag, idf, weights) for bag in bags]
            signals.append(Signal("coverage", _order(candidates, cov), COVERAGE_WEIGHT))
    near, weight = _time_order(asked, now, candidates, signals)
    if near and weight:
        signals.append(Signal("time", near, weight))
    fused = reciprocal_rank_fusion(signals, k=RRF_K)
    threads = _threads(candidates) if THREAD_WEIGHT else {}
    if not threads:
        return [Ranked(f.key, f.score, (name,)) for f in fused[:limit]]
    keys = [f.key for f in fused]
    scores = _thread_support(keys, threads)
    if NEIGHBOUR_WEIGHT:
        scores = _neighbour_support(keys, scores, threads, candidates)
    order = sorted(range(len(keys)), key=lambda i: (-scores[i], i))[:limit]
    return [Ranked(keys[i], scores[i], (name,)) for i in order]


def _analysed(c: Candidate) -> str:
    return c.analyzed if c.analyzed is not None else " ".join(analyze(c.text))


def _time_order(asked: str, now: datetime | None, candidates: Sequence[Candidate],
                words: Sequence[Signal]) -> tuple[tuple[str, ...], float]:
    """Candidates inside the dates the question names (else the relative period it names,
    counted back from ``now``), nearest first, with the signal's weight (empty when it names
    none or no candidate has a readable time near it)."""
    named: list[timeref.Period] = list(timeref.dates(asked))
    weight, is_date = DATE_WEIGHT, bool(named)
    if not named and now is not None:
        window = timeref.resolve(asked, now)
        named, weight = ([window] if window is not None else []), TIME_WEIGHT
    if not named:
        return (), 0.0
    close = []
    for c in candidates:
        when = timeref.parse_instant(c.when)
        close.append(max(timeref.closeness(p, when) for p in named) if when is not None else 0.0)
    if is_date:
        # A date names a span, not a point: every record near it is in, in the order the
        # question's words give them.
        place = {f.key: i for i, f in enumerate(reciprocal_rank_fusion(words, k=RRF_K))}
        ranked = sorted((i for i, v in enumerate(close) if v > 0),
                        key=lambda i: place[candidates[i].key])
        return tuple(candidates[i].key for i in ranked), weight
    return _order(candidates, close), weight


def _neighbour_support(keys: Sequence[str], scores: Sequence[float], threads: Mapping[str, str],
                       candidates: Sequence[Candidate]) -> list[float]:
    """Context on both sides of a hit: a record gains :data:`NEIGHBOUR_WEIGHT` times the score
    of the better of the records written just before and just after it in its conversation
    (a question and its answer, an answer and what it refers to)."""
    at = {key: i for i, key in enumerate(keys)}
    sides: dict[int, list[int]] = {}
    for c in candidates:
        i, j = at.get(c.key), at.get(c.follows) if c.follows is not None else None
        if i is None or j is None or threads.get(c.key) is None \
                or threads.get(c.key) != threads.get(keys[j]):
            continue
        sides.setdefault(i, []).append(j)
        sides.setdefault(j, []).append(i)
    return [s + NEIGHBOUR_WEIGHT * max(scores[j] for j in sides[i]) if i in sides else s
            for i, s in enumerate(scores)]


def _threads(candidates: Sequence[Candidate]) -> dict[str, str]:
    out: dict[str, str] = {}
    for c in candidates:
        value = c.thread if c.thread is not None else c.attributes.get(THREAD_ATTRIBUTE)
        if isinstance(value, str) and value:
            out[c.key] = value
    return out


def _thread_support(keys: Sequence[str], threads: Mapping[str, str]) -> list[float]:
    """Records of one conversation support each other: a record's score is its own
    ``1/(THREAD_K + rank)`` plus :data:`THREAD_WEIGHT` times that of its best
    :data:`THREAD_MATES` thread-mates (so a long conversation does not win by volume)."""
    own = [1.0 / (THREAD_K + i + 1) for i in range(len(keys))]
    # ``keys`` are best first, so the first THREAD_MATES + 1 of a thread are its best; a
    # record among them is supported by the others, any other record by the first ones.
    best: dict[str, list[int]] = {}
    for i, key in enumerate(keys):
        t = threads.get(key)
        if t is not None:
            top = best.setdefault(t, [])
            if len(top) <= THREAD_MATES:
                top.append(i)
    head = {t: sum(own[j] for j in top[:THREAD_MATES]) for t, top in best.items()}
    out = []
    for i, key in enumerate(keys):
        t = threads.get(key)
        if t is None:
            out.append(own[i])
            continue
        top = best[t]
        if i in top[:THREAD_MATES]:
            mates = head[t] - own[i] + (own[top[THREAD_MATES]] if len(top) > THREAD_MATES else 0.0)
        else:
            mates = head[t]
        out.append(own[i] + THREAD_WEIGHT * mates)
    return out

__all__ = ["DEFAULT_CANDIDATES", "TIME_WEIGHT", "Candidate", "Ranked", "candidate_limit", "rerank"]
