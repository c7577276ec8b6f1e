"""BM25 computed here, from statistics over the memories a recall searches — never beyond them.

SQLite FTS5's ``bm25()`` counts documents and term frequencies over its whole table, so one
tenant's records change the ranking another tenant gets; PostgreSQL has no BM25 at all. So the
score is computed in the project's own code, from what either backend can count over the
caller's reach:

- the candidates, each with its analysed text (and an episode's context, weighted apart);
- :class:`Statistics` restricted to the records searched: how many there are, their total
  analysed length, and how many hold each query term.

Given the same statistics, :func:`scores` equals FTS5's ``bm25()`` with the same column
weights (``k1`` 1.2, ``b`` 0.75, idf ``ln((N - n + 0.5) / (n + 0.5))`` floored at 1e-6, a term
counted per column times the column's weight, the document's length over all its columns);
the test suite checks it against FTS5 itself. Query terms carry weights
(:mod:`spelling`: a correction counts less than a word typed exactly).

Pure: no I/O. The storage layer counts; this module only computes.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from palimpsest.search.fts import CONTEXT_WEIGHT

K1 = 1.2
B = 0.75
MIN_IDF = 1e-6
"""FTS5 floors a term held by more than half the documents at this (instead of going below 0)."""


@dataclass(frozen=True, slots=True)
class Statistics:
    """Counts over the records a recall searches (its reach, its statuses and types).

    ``total_length`` sums the analysed terms of every column of those records; ``df`` says how
    many of them hold each query term in any column (a term missing from it holds none).
    """

    documents: int
    total_length: int
    df: Mapping[str, int]

    @property
    def average_length(self) -> float:
        """Mean analysed length of a searched record (1.0 when there are none)."""
        return self.total_length / self.documents if self.documents else 1.0


@dataclass(frozen=True, slots=True)
class Document:
    """A candidate's analysed columns: its own text and (for an episode) its context."""

    text: str
    context: str = ""


def idf(term: str, stats: Statistics) -> float:
    """FTS5's inverse document frequency of a term among the searched records."""
    n = stats.df.get(term, 0)
    value = math.log((stats.documents - n + 0.5) / (n + 0.5))
    return value if value > 0 else MIN_IDF


def _count(tokens: Sequence[str], counts: Mapping[str, int], term: str) -> int:
    """How often ``term`` occurs; a CJK phrase term (characters separated by spaces) counts
    its occurrences as a phrase, as FTS5 matches it."""
    if " " not in term:
        return counts.get(term, 0)
    parts = term.split()
    n = len(parts)
    return sum(1 for i in range(len(tokens) - n + 1) if list(tokens[i:i + n]) == parts)


def scores(
    weights: Mapping[str, float],
    documents: Sequence[Document],
    stats: Statistics,
    *,
    context_weight: float = CONTEXT_WEIGHT,
) -> list[float]:
    """BM25 of each document for the weighted query terms (higher is better).

    A term's contribution is multiplied by its weight. A term no document holds adds nothing.
    """
    rarity = {t: idf(t, stats) * w for t, w in weights.items() if w > 0}
    average = stats.average_length
    out: list[float] = []
    for doc in documents:
        own = doc.text.split()
        around = doc.context.split()
        length = len(own) + len(around)
        norm = K1 * (1 - B + B * length / average)
        tf = Counter(own)
        ctx = Counter(around) if around else None
        total = 0.0
        for term, weight in rarity.items():
            freq = float(_count(own, tf, term))
            if ctx is not None:
                freq += context_weight * _count(around, ctx, term)
            if freq:
                total += weight * freq * (K1 + 1) / (freq + norm)
        out.append(total)
    return out


__all__ = ["K1", "MIN_IDF", "B", "Document", "Statistics", "idf", "scores"]
