"""The final ranking of recall: FTS5 candidates in, ordered results with ``why`` out.

The service's storage layer runs the MATCH (see :mod:`palimpsest.search.fts`) and hands the
top candidates here, each with its raw text and FTS5 ``bm25()`` score. This module re-scores
them with what BM25 alone misses and fuses the signals:

- ``text``: FTS5 BM25 (per the storage layer's column weights);
- ``query``: the same candidates re-scored on the query's analysed terms with coverage
  (how many distinct query terms a record holds) and proximity (terms close together), which
  favours a record that answers the whole question over one that repeats one word.

Pure: no SQL, no clock, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

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


@dataclass(frozen=True, slots=True)
class Ranked:
    """One ranked result: the candidate key, its fused score, and the signals that found it."""

    key: str
    score: float
    why: tuple[str, ...]


def candidate_limit(limit: int) -> int:
    """How many FTS rows to fetch for a recall that returns ``limit`` results."""
    return max(DEFAULT_CANDIDATES, 4 * limit)


def _coverage_scores(terms: Sequence[str], candidates: Sequence[Candidate]) -> list[float]:
    """Distinct query terms present, weighted by rarity among the candidates."""
    if not terms:
        return [0.0] * len(candidates)
    bags = [set(c.analyzed.split() if c.analyzed is not None else analyze(c.text))
            for c in candidates]
    n = len(candidates)
    weights = {}
    for term in terms:
        df = sum(1 for bag in bags if term in bag)
        weights[term] = 1.0 / (1.0 + df / max(n, 1)) if df else 0.0
    return [sum(weights[t] for t in terms if t in bag) for bag in bags]


def rerank(
    query: str | None,
    candidates: Sequence[Candidate],
    *,
    limit: int,
    text: str | None = None,
) -> list[Ranked]:
    """Order ``candidates`` for a recall with ``query`` and/or ``text``; at most ``limit``.

    Keys must be unique. The result never contains a key that is not a candidate.
    """
    if not candidates or limit <= 0:
        return []
    lexical = sorted(candidates, key=lambda c: (-c.lexical, c.key))
    signals = [Signal("text" if text and not query else "query", tuple(c.key for c in lexical))]
    words = " ".join(x for x in (query, text) if x)
    terms = query_terms(words)
    coverage = _coverage_scores(terms, candidates)
    by_cov = sorted(
        zip(candidates, coverage, strict=True), key=lambda cc: (-cc[1], -cc[0].lexical, cc[0].key)
    )
    signals.append(Signal("coverage", tuple(c.key for c, _ in by_cov), weight=1.0))
    fused = reciprocal_rank_fusion(signals, limit=limit)
    return [Ranked(f.key, f.score, tuple(s for s in f.signals if s != "coverage")) for f in fused]


__all__ = ["DEFAULT_CANDIDATES", "Candidate", "Ranked", "candidate_limit", "rerank"]
