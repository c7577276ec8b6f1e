"""Render bench/quality.py's JSON as the recall-quality section of docs/benchmarks.md."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

BEGIN = "<!-- recall-quality:begin -->"
END = "<!-- recall-quality:end -->"
KS = (1, 3, 5, 10)


def _f(x: Any) -> str:
    return f"{x:.3f}" if isinstance(x, float) else str(x)


LATENCY_KINDS = {
    "wall": "wall, limit 100",
    "cpu": "CPU, limit 100",
    "wall_limit10": "wall, limit 10",
    "cpu_limit10": "CPU, limit 10",
}


def _lat(lat: dict[str, Any], kind: str) -> str:
    v = lat.get(kind)
    return f"{v['p50']} / {v['p99']}" if v else "–"


def _latency_table(data: dict[str, Any]) -> list[str]:
    out = ["Recall latency, ms p50 / p99 (wall = elapsed on the loaded machine; CPU = this "
           "process's CPU time):", "", "| engine | " + " | ".join(LATENCY_KINDS.values()) + " |",
           "|" + "---|" * (1 + len(LATENCY_KINDS))]
    for engine, result in data.items():
        lat = result["latency_ms"]
        out.append(f"| {engine} | " + " | ".join(_lat(lat, k) for k in LATENCY_KINDS) + " |")
    return [*out, ""]


def _locomo(res: dict[str, Any], split: str) -> list[str]:
    data = res["locomo"][split]
    name = "held-out" if split == "held" else "development"
    out = [f"#### LoCoMo — {name} set", ""]
    for level in ("turn", "session"):
        unit = "dialog turn" if level == "turn" else "session"
        out += [f"{level.capitalize()}-level (unit = a {unit}):", ""]
        metrics = [f"{m}@{k}" for m in ("recall_any", "recall_all", "ndcg_any") for k in KS]
        head = ["engine", "bucket", "n", *metrics]
        out += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for engine in ("service", "local", "bm25"):
            if engine not in data:
                continue
            for bucket, row in data[engine][level].items():
                cells = [engine, bucket, str(row["n"])] + [_f(row.get(h, "")) for h in head[3:]]
                out.append("| " + " | ".join(cells) + " |")
        out.append("")
    return [*out, *_latency_table(data)]


def _lme(res: dict[str, Any], split: str) -> list[str]:
    data = res["longmemeval_s"][split]
    name = "held-out" if split == "held" else "development"
    out = [f"#### LongMemEval_S — {name} set", ""]
    cols = ["recall_all@5", "ndcg_any@5", "recall_all@10", "ndcg_any@10", "recall_any@5",
            "recall_any@10"]
    out += ["| engine | protocol | n | " + " | ".join(cols) + " |", "|" + "---|" * (3 + len(cols))]
    names = {
        "official_session": "official, session (user turns)",
        "official_turn": "official, turn (user turns)",
        "common_session_user_assistant":
            "common variant, session (user+assistant turns, gold answer_session_ids)",
    }
    for engine in ("service", "local", "bm25"):
        if engine not in data:
            continue
        for key, label in names.items():
            row = data[engine][key]
            cells = " | ".join(_f(row.get(c, "")) for c in cols)
            out.append(f"| {engine} | {label} | {row['n']} | {cells} |")
    out.append("")
    out += ["Official session recall_all@5 by question type: " + "; ".join(
        f"{e}: " + ", ".join(f"{t} {_f(r['recall_all@5'])} (n={r['n']})"
                             for t, r in data[e]["official_session_by_type"].items())
        for e in data), ""]
    return [*out, *_latency_table(data)]


def _headline(res: dict[str, Any]) -> list[str]:
    rows: list[tuple[str, str, str, str, str]] = []
    loc = res.get("locomo", {}).get("held")
    if loc:
        s, b = loc["service"], loc["bm25"]
        for level, metric, target in (("turn", "recall_any@5", "≥ 0.60"),
                                      ("turn", "recall_all@5", "> BM25"),
                                      ("turn", "ndcg_any@5", "> BM25"),
                                      ("session", "recall_any@5", "> BM25"),
                                      ("session", "recall_all@5", "> BM25")):
            rows.append((f"LoCoMo {level} {metric}, categories 1–4",
                         _f(s[level]["overall_1_4"][metric]), _f(b[level]["overall_1_4"][metric]),
                         target, ""))
        for kind in ("cpu_limit10", "wall_limit10", "cpu", "wall"):
            rows.append((f"LoCoMo recall ms p50 / p99 ({LATENCY_KINDS[kind]})",
                         _lat(s["latency_ms"], kind), _lat(b["latency_ms"], kind.split("_")[0]),
                         "p50 ≤ 20", ""))
    lme = res.get("longmemeval_s", {}).get("held")
    if lme:
        s, b = lme["service"], lme["bm25"]
        for key, metric, target in (("official_session", "recall_all@5", "≥ 0.85"),
                                    ("official_session", "ndcg_any@5", "> BM25"),
                                    ("official_session", "recall_all@10", "> BM25"),
                                    ("official_session", "ndcg_any@10", "> BM25"),
                                    ("official_turn", "recall_all@5", "> BM25"),
                                    ("official_turn", "ndcg_any@5", "> BM25"),
                                    ("common_session_user_assistant", "recall_any@5", "≥ 0.97")):
            label = {"official_session": "official session",
                     "official_turn": "official turn",
                     "common_session_user_assistant": "common variant session"}[key]
            rows.append((f"LongMemEval_S {label} {metric}", _f(s[key][metric]),
                         _f(b[key][metric]), target, ""))
        for kind in ("cpu_limit10", "wall_limit10", "cpu", "wall"):
            rows.append((f"LongMemEval_S recall ms p50 / p99 ({LATENCY_KINDS[kind]})",
                         _lat(s["latency_ms"], kind), _lat(b["latency_ms"], kind.split("_")[0]),
                         "p50 ≤ 20", ""))
    if not rows:
        return []
    out = ["### Headline (held-out set)", "",
           "| metric | Palimpsest (service) | BM25 same run | issue target |", "|---|---|---|---|"]
    out += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d, _ in rows]
    return [*out, ""]


def render(res: dict[str, Any], preface: str, notes: str = "") -> str:
    """The whole section, markers included."""
    lines = [BEGIN, "## Recall quality (bench/quality.py)", "", preface.strip(), ""]
    lines += _headline(res)
    if notes.strip():
        lines += [notes.strip(), ""]
    for split in ("held", "dev"):
        if "locomo" in res and split in res["locomo"]:
            lines += _locomo(res, split)
        if "longmemeval_s" in res and split in res["longmemeval_s"]:
            lines += _lme(res, split)
    lines.append(END)
    return "\n".join(lines) + "\n"


def write(doc: Path, section: str) -> None:
    """Replace the section between the markers (append it when absent)."""
    text = doc.read_text(encoding="utf-8") if doc.exists() else "# Benchmarks\n"
    pattern = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END) + r"\n?", re.S)
    if pattern.search(text):
        text = pattern.sub(lambda _m: section, text)
    else:
        text = text.rstrip("\n") + "\n\n" + section
    doc.write_text(text, encoding="utf-8")
