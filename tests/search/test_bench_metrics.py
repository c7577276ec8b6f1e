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


@pytest.fixture(scope="module")
def qp() -> ModuleType:
    path = BENCH.with_name("quality_perturb.py")
    spec = importlib.util.spec_from_file_location("quality_perturb", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _one_edit(a: str, b: str) -> bool:
    """Damerau distance exactly 1 (drop, insert, replace, or swap two neighbours)."""
    if abs(len(a) - len(b)) > 1 or a == b:
        return False
    i = next((k for k, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    return (a[i + 1:] == b[i:] or a[i:] == b[i + 1:] or a[i + 1:] == b[i + 1:]
            or (a[i:i + 2] == b[i:i + 2][::-1] and a[i + 2:] == b[i + 2:]))


QUESTION = "What did Caroline's friends give her on October 13, 2023?"


def test_perturbations_are_deterministic_per_question(qp: ModuleType) -> None:
    for change in qp.PERTURBATIONS.values():
        assert change(QUESTION, "conv-26#3") == change(QUESTION, "conv-26#3")
    fillers = {qp.filler(QUESTION, f"q{i}") for i in range(40)}
    assert len(fillers) > 1  # the id chooses the preamble


def test_each_perturbation_does_what_it_says(qp: ModuleType) -> None:
    assert qp.lower(QUESTION, "x") == QUESTION.lower()
    assert qp.no_punct(QUESTION, "x") == "What did Carolines friends give her on October 13 2023"
    padded = qp.filler(QUESTION, "x")
    assert any(padded.startswith(p) for p in qp.FILLERS)
    assert padded.lower().endswith(QUESTION.lower())
    for i in range(50):
        slipped = qp.typo(QUESTION, f"q{i}")
        before, after = QUESTION.split(), slipped.split()
        assert len(before) == len(after)
        changed = [(a, b) for a, b in zip(before, after, strict=True) if a != b]
        assert len(changed) == 1  # exactly one word, by one edit
        a, b = changed[0]
        word = a.strip("'s,?")
        assert len(word) >= 4 and word.lower() not in {"what"}  # a question word is never hit
        assert _one_edit(a, b)
    together = qp.everything(QUESTION, "x")
    assert together == together.lower() and "," not in together and "?" not in together


def test_typo_leaves_a_question_without_long_words_alone(qp: ModuleType) -> None:
    assert qp.typo("Who did it?", "x") == "Who did it?"
