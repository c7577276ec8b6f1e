"""The metric definitions bench/quality.py reports (upstream LongMemEval semantics)."""

from __future__ import annotations

import hashlib
import importlib.util
import math
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "quality_data.py"


@pytest.fixture(scope="module")
def qd() -> ModuleType:
    spec = importlib.util.spec_from_file_location("quality_data", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["quality_data"] = module
    spec.loader.exec_module(module)
    return module


def test_split_is_last_hex_digit_parity(qd: ModuleType) -> None:
    for qid in ("001be529", "conv-26#0", "gpt4_2655b836", "x_abs"):
        digit = int(hashlib.sha256(qid.encode()).hexdigest()[-1], 16)
        assert qd.is_dev(qid) is (digit % 2 == 0)


def test_recall_any_all(qd: ModuleType) -> None:
    s = qd.scores(["a", "x", "b", "y"], frozenset({"a", "b"}), 10)
    assert (s["recall_any@1"], s["recall_all@1"]) == (1.0, 0.0)
    assert (s["recall_any@3"], s["recall_all@3"]) == (1.0, 1.0)
    assert qd.scores(["x"], frozenset({"a"}), 10)["recall_any@5"] == 0.0


def test_ndcg_matches_upstream_formula(qd: ModuleType) -> None:
    # Upstream dcg: rel[0] + sum(rel[i] / log2(i + 1)) for i >= 1 (ranks 1 and 2 weigh 1).
    got = qd.ndcg(["x", "a", "y", "b"], frozenset({"a", "b"}), 10, 5)
    dcg = 1 / math.log2(2) + 1 / math.log2(4)
    ideal = 1 + 1 / math.log2(2)
    assert got == pytest.approx(dcg / ideal)
    assert qd.ndcg(["a", "b"], frozenset({"a", "b"}), 10, 5) == 1.0
    assert qd.ndcg(["x"], frozenset({"a"}), 10, 1) == 0.0


def test_sessions_from_turns_first_seen(qd: ModuleType) -> None:
    session_of = {"t1": "s1", "t2": "s2", "t3": "s1", "t4": "s3"}
    assert qd.sessions_of(["t3", "t1", "t2", "t4"], session_of) == ["s1", "s2", "s3"]


def test_percentile_nearest_rank(qd: ModuleType) -> None:
    values = [float(i) for i in range(1, 101)]
    assert qd.percentile(values, 50) == 50.0
    assert qd.percentile(values, 99) == 99.0
    assert qd.percentile([], 50) == 0.0


def test_locomo_evidence_quirks_normalised(qd: ModuleType) -> None:
    known = {"D8:6", "D9:17", "D11:26", "D30:5", "D1:3"}
    raw = ["D8:6; D9:17", "D:11:26", "D30:05", "D10:19", "D"]
    assert qd._evidence_ids(raw, known) == {"D8:6", "D9:17", "D11:26", "D30:5"}
