"""Rank fusion: several ranked signals in, one deterministic ranking out.

A recall request can carry several signals (uhp-memories.md §7: ``query``, ``text``,
``filters``), and the engine may rank by more than one method. Each signal arrives as an
ordered list of keys (best first, optionally with raw scores); this module fuses them.

- :func:`reciprocal_rank_fusion` — weighted RRF: ``score(d) = Σ w_s / (k + rank_s(d))``. Robust
  to signals whose raw scores live on different scales.
- :func:`score_fusion` — weighted sum of min–max normalised raw scores, for signals whose scores
  are meaningful (e.g. BM25 and a cosine similarity).

Ties never depend on hash order or input set order: equal fused scores are broken by the best
rank the key reached in any signal, then by how many signals found it, then by the key itself.
Nothing here touches storage.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from palimpsest.errors import InvalidInput

DEFAULT_RRF_K = 60.0
"""The usual RRF constant: the 1st and 10th ranks differ by about 13 %, not 10×."""


@dataclass(frozen=True, slots=True)
class Signal:
    """One ranked list: ``keys`` best first, no repeats; ``scores`` parallel (higher is better).

    ``scores`` may be empty when only the order is known (RRF needs no scores).
    """

    name: str
    keys: tuple[str, ...]
    weight: float = 1.0
    scores: tuple[float, ...] = field(default=())

    def __post_init__(self) -> None:
        if not self.name:
            raise InvalidInput("a fusion signal needs a name")
        if self.weight < 0:
            raise InvalidInput(f"signal {self.name}: weight must be ≥ 0")
        if self.scores and len(self.scores) != len(self.keys):
            raise InvalidInput(
                f"signal {self.name}: {len(self.scores)} scores for {len(self.keys)} keys",
            )
        if len(set(self.keys)) != len(self.keys):
            raise InvalidInput(f"signal {self.name}: repeated key")


@dataclass(frozen=True, slots=True)
class Fused:
    """One fused result: its key, fused score, and the signals that ranked it (input order)."""

    key: str
    score: float
    signals: tuple[str, ...]


class _Acc:
    """Per-key accumulators, kept in plain dicts (this runs for hundreds of keys per recall)."""

    __slots__ = ("best", "names", "parts")

    def __init__(self) -> None:
        self.parts: dict[str, list[float]] = {}
        self.best: dict[str, int] = {}
        self.names: dict[str, list[str]] = {}

    def add(self, key: str, value: float, rank: int, name: str) -> None:
        parts = self.parts.get(key)
        if parts is None:
            self.parts[key] = [value]
            self.best[key] = rank
            self.names[key] = [name]
            return
        parts.append(value)
        self.names[key].append(name)
        self.best[key] = min(self.best[key], rank)

    def finish(self, limit: int | None) -> list[Fused]:
        # Summed in sorted order so a total never depends on the order of the signals.
        totals = {k: (p[0] if len(p) == 1 else sum(sorted(p))) for k, p in self.parts.items()}
        best, names = self.best, self.names
        order = sorted(totals, key=lambda k: (-totals[k], best[k], -len(names[k]), k))
        if limit is not None:
            order = order[: max(limit, 0)]
        return [Fused(k, totals[k], tuple(names[k])) for k in order]


def reciprocal_rank_fusion(
    signals: Sequence[Signal], *, k: float = DEFAULT_RRF_K, limit: int | None = None
) -> list[Fused]:
    """Weighted reciprocal rank fusion of ``signals``; ranks are 1-based.

    A signal with weight 0 contributes nothing to scores but is still named in ``signals``
    of the keys it found (it matched, it just does not move the order).
    """
    if k < 0:
        raise InvalidInput("RRF k must be ≥ 0")
    acc = _Acc()
    for signal in signals:
        weight, name = signal.weight, signal.name
        for index, key in enumerate(signal.keys):
            acc.add(key, weight / (k + index + 1), index + 1, name)
    return acc.finish(limit)


def _normalised(scores: tuple[float, ...]) -> list[float]:
    high, low = max(scores), min(scores)
    if high == low:
        return [1.0] * len(scores)
    span = high - low
    return [(s - low) / span for s in scores]


def score_fusion(signals: Sequence[Signal], *, limit: int | None = None) -> list[Fused]:
    """Weighted sum of per-signal min–max normalised scores (a key a signal missed gets 0).

    Every signal must carry ``scores``; a signal whose scores are all equal gives each of its
    keys 1.0.
    """
    acc = _Acc()
    for signal in signals:
        if signal.keys and not signal.scores:
            raise InvalidInput(f"signal {signal.name}: score fusion needs scores")
        if not signal.keys:
            continue
        normalised = _normalised(signal.scores)
        for index, (key, value) in enumerate(zip(signal.keys, normalised, strict=True)):
            acc.add(key, signal.weight * value, index + 1, signal.name)
    return acc.finish(limit)


__all__ = ["DEFAULT_RRF_K", "Fused", "Signal", "reciprocal_rank_fusion", "score_fusion"]
