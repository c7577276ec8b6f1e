"""bench/quality_report.py renders the held-out headline against the issue's targets, both
same-run baselines beside ours, the perturbation tables and the machine's load."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "quality_report.py"


@pytest.fixture(scope="module")
def report() -> ModuleType:
    spec = importlib.util.spec_from_file_location("quality_report", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["quality_report"] = module
    spec.loader.exec_module(module)
    return module


def _lat(cpu10: float) -> dict[str, dict[str, float]]:
    return {k: {"p50": cpu10, "p99": cpu10 * 3, "n": 10}
            for k in ("cpu", "wall", "cpu_limit10", "wall_limit10")}


def _locomo(any5: float, all_four: float, cpu10: float) -> dict[str, Any]:
    metrics = {"recall_any@5": any5, "recall_all@5": any5 - 0.1, "ndcg_any@5": any5 - 0.2,
               "n": 773}
    return {"turn": {"overall_1_4": metrics}, "session": {"overall_1_4": metrics},
            "perturbed_turn_1_4": {p: {"recall_any@5": any5, "n": 773} for p in
                                   ("none", "lower", "no_punct", "filler", "typo")}
            | {"all": {"recall_any@5": all_four, "n": 773}},
            "latency_ms": _lat(cpu10)}


def _lme(session: float, upstream: float, common: float) -> dict[str, Any]:
    def m(v: float) -> dict[str, float]:
        return {"recall_all@5": v, "ndcg_any@5": v, "recall_all@10": v, "recall_any@5": v,
                "n": 230}
    return {"official_session": m(session), "upstream_session": m(upstream),
            "official_turn": m(session - 0.2), "upstream_turn": m(upstream - 0.2),
            "common_session_user_assistant": m(common),
            "official_session_by_type": {"multi-session": m(session)},
            "perturbed_official_session": {"all": m(session - 0.01), "none": m(session)},
            "latency_ms": _lat(6.0)}


def test_headline_rows_say_whether_each_target_is_met(report: ModuleType) -> None:
    res = {"locomo": {"held": {"service": _locomo(0.683, 0.661, 5.03),
                               "bm25": _locomo(0.314, 0.308, 0.9),
                               "bm25_words": _locomo(0.476, 0.357, 1.7)}},
           "longmemeval_s": {"held": {"service": _lme(0.91, 0.87, 0.99),
                                      "bm25": _lme(0.74, 0.74, 0.92),
                                      "bm25_words": _lme(0.82, 0.82, 0.96)}},
           "machine": {"locomo held": "load average 7.0 / 10.5 / 10.2 at the end"}}
    text = report.render(res, "Preface.")
    rows = {line.split(" | ")[0].lstrip("| "): line for line in text.splitlines()
            if line.startswith("| ")}
    assert rows["LoCoMo turn recall_any@5, categories 1–4"] == (
        "| LoCoMo turn recall_any@5, categories 1–4 | 0.683 | 0.314 | 0.476 | ≥ 0.72 | **no** |")
    assert rows["… with all four perturbations"].endswith(
        "| 0.661 | 0.308 | 0.357 | ≥ 0.66 | yes |")
    assert rows["LongMemEval_S official session recall_all@5 (bench protocol)"].endswith(
        "| 0.910 | 0.740 | 0.820 | ≥ 0.90 | yes |")
    assert rows["LongMemEval_S official session recall_all@5, exactly as upstream (user turns "
                "only)"].endswith("| 0.870 | 0.740 | 0.820 | ≥ 0.88 | **no** |")
    assert rows["LongMemEval_S common variant session recall_any@5"].endswith("≥ 0.98 | yes |")
    latency = next(v for k, v in rows.items() if k.startswith("LoCoMo recall ms"))
    assert latency.endswith("| 5.03 / 15.09 | 0.9 / 2.7 | 1.7 / 5.1 | p50 ≤ 10 | yes |")
    assert "Machine during the runs: locomo held: load average 7.0 / 10.5 / 10.2" in text
    # the perturbation tables: every engine, every change
    assert "| bm25_words | 0.476 | 0.476 | 0.476 | 0.476 | 0.476 | 0.357 |" in text
    assert "official, session, exactly as upstream (only user turns written)" in text
    assert text.startswith(report.BEGIN) and text.endswith(report.END + "\n")


def test_a_row_behind_a_baseline_is_not_met_whatever_its_target(report: ModuleType) -> None:
    res = {"locomo": {"held": {"service": _locomo(0.75, 0.70, 5.0),
                               "bm25": _locomo(0.80, 0.30, 1.0)}}}
    text = report.render(res, "Preface.")
    assert ("| LoCoMo turn recall_any@5, categories 1–4 | 0.750 | 0.800 | – | ≥ 0.72 | **no** |"
            in text)
