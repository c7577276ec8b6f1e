"""Rank fusion: RRF and score fusion, deterministic ties, input validation."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from palimpsest.errors import InvalidInput
from palimpsest.search.fusion import Signal, reciprocal_rank_fusion, score_fusion


def test_rrf_rewards_agreement() -> None:
    a = Signal("text", ("x", "y", "z"))
    b = Signal("query", ("y", "x", "w"))
    fused = reciprocal_rank_fusion([a, b], k=60)
    assert [f.key for f in fused][:2] in (["x", "y"], ["y", "x"])
    assert {f.key for f in fused} == {"x", "y", "z", "w"}
    by_key = {f.key: f for f in fused}
    assert by_key["x"].signals == ("text", "query")
    assert by_key["w"].signals == ("query",)
    assert by_key["x"].score == pytest.approx(1 / 61 + 1 / 62)


def test_rrf_tie_broken_by_best_rank_then_key() -> None:
    # x and y have identical fused scores; x reached rank 1 somewhere.
    fused = reciprocal_rank_fusion([Signal("a", ("x", "y")), Signal("b", ("y", "x"))])
    assert [f.key for f in fused] == ["x", "y"]
    fused = reciprocal_rank_fusion([Signal("a", ("b",)), Signal("c", ("a",))])
    assert [f.key for f in fused] == ["a", "b"]


def test_weights_move_the_order() -> None:
    a = Signal("text", ("x", "y"), weight=1.0)
    b = Signal("query", ("y", "x"), weight=3.0)
    assert [f.key for f in reciprocal_rank_fusion([a, b])] == ["y", "x"]


def test_zero_weight_names_but_does_not_score() -> None:
    fused = reciprocal_rank_fusion([Signal("a", ("x",)), Signal("filters", ("y", "x"), weight=0)])
    assert [(f.key, f.signals) for f in fused] == [("x", ("a", "filters")), ("y", ("filters",))]
    assert fused[1].score == 0


def test_limit() -> None:
    assert len(reciprocal_rank_fusion([Signal("a", tuple("abcdef"))], limit=3)) == 3
    assert reciprocal_rank_fusion([]) == []


def test_score_fusion_normalises_each_signal() -> None:
    bm25 = Signal("text", ("x", "y", "z"), scores=(30.0, 20.0, 10.0))
    cos = Signal("query", ("z", "y"), scores=(0.9, 0.1), weight=2.0)
    fused = score_fusion([bm25, cos])
    scores = {f.key: f.score for f in fused}
    assert scores == {"x": 1.0, "y": pytest.approx(0.5), "z": pytest.approx(2.0)}
    assert [f.key for f in fused] == ["z", "x", "y"]


def test_score_fusion_needs_scores() -> None:
    with pytest.raises(InvalidInput):
        score_fusion([Signal("a", ("x",))])


@pytest.mark.parametrize(
    "make",
    [
        lambda: Signal("", ("x",)),
        lambda: Signal("a", ("x", "x")),
        lambda: Signal("a", ("x",), weight=-1),
        lambda: Signal("a", ("x", "y"), scores=(1.0,)),
    ],
)
def test_bad_signals_refused(make: object) -> None:
    with pytest.raises(InvalidInput):
        make()  # type: ignore[operator]


@settings(max_examples=100, deadline=None, derandomize=True)
@given(st.lists(st.lists(st.sampled_from("abcdefgh"), unique=True), min_size=1, max_size=4))
def test_fusion_is_order_independent_of_signal_set(lists: list[list[str]]) -> None:
    signals = [Signal(f"s{i}", tuple(keys)) for i, keys in enumerate(lists)]
    forward = [f.key for f in reciprocal_rank_fusion(signals)]
    backward = [f.key for f in reciprocal_rank_fusion(list(reversed(signals)))]
    assert forward == backward
    assert sorted(forward) == sorted({k for keys in lists for k in keys})
