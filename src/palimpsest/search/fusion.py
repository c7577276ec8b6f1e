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


@dataclass(slots=True)
class _Acc:
    parts: list[float] = field(default_factory=list)
    best_rank: int = 1 << 30
    names: list[str] = field(default_factory=list)

    @property
    def score(self) -> float:
        # Summed in sorted order so the total never depends on the order of the signals.
        return sum(sorted(self.parts))


def _finish(acc: dict[str, _Acc], limit: int | None) -> list[Fused]:
    totals = {key: a.score for key, a in acc.items()}
    order = sorted(
        acc.items(), key=lambda kv: (-totals[kv[0]], kv[1].best_rank, -len(kv[1].names), kv[0])
    )
    if limit is not None:
        order = order[: max(limit, 0)]
    return [Fused(key, totals[key], tuple(a.names)) for key, a in order]


def reciprocal_rank_fusion(
    signals: Sequence[Signal], *, k: float = DEFAULT_RRF_K, limit: int | None = None
) -> list[Fused]:
    """Weighted reciprocal rank fusion of ``signals``; ranks are 1-based.

    A signal with weight 0 contributes nothing to scores but is still named in ``signals``
    of the keys it found (it matched, it just does not move the order).
    """
    if k < 0:
        raise InvalidInput("RRF k must be ≥ 0")
    acc: dict[str, _Acc] = {}
    for signal in signals:
        for index, key in enumerate(signal.keys):
            entry = acc.setdefault(key, _Acc())
            entry.parts.append(signal.weight / (k + index + 1))
            entry.best_rank = min(entry.best_rank, index + 1)
            entry.names.append(signal.name)
    return _finish(acc, limit)


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
    acc: dict[str, _Acc] = {}
    for signal in signals:
        if signal.keys and not signal.scores:
            raise InvalidInput(f"signal {signal.name}: score fusion needs scores")
        if not signal.keys:
            continue
        normalised = _normalised(signal.scores)
        for index, (key, value) in enumerate(zip(signal.keys, normalised, strict=True)):
            entry = acc.setdefault(key, _Acc())
            entry.parts.append(signal.weight * value)
            entry.best_rank = min(entry.best_rank, index + 1)
            entry.names.append(signal.name)
    return _finish(acc, limit)


__all__ = ["DEFAULT_RRF_K", "Fused", "Signal", "reciprocal_rank_fusion", "score_fusion"]
