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


ENGINES = ("service", "bm25", "bm25_words")
"""Ours, then the two same-run baselines (space split as upstream; lower-cased ``\\w+``)."""
PERTURBATIONS = {"none": "as asked", "lower": "lower-case", "no_punct": "no punctuation",
                 "filler": "filler", "typo": "one typo", "all": "all four"}

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
        for engine in _engines(data):
            for bucket, row in data[engine][level].items():
                cells = [engine, bucket, str(row["n"])] + [_f(row.get(h, "")) for h in head[3:]]
                out.append("| " + " | ".join(cells) + " |")
        out.append("")
    return [*out, *_perturbed(data, "perturbed_turn_1_4", "turn recall_any@5, categories 1–4",
                              "recall_any@5"), *_latency_table(data)]


def _engines(data: dict[str, Any]) -> list[str]:
    return [e for e in ENGINES if e in data]


def _perturbed(data: dict[str, Any], key: str, what: str, metric: str) -> list[str]:
    """One row per engine: the metric for the question as asked and for each change."""
    if not any(key in data[e] for e in data):
        return []
    head = ["engine", *PERTURBATIONS.values()]
    out = [f"Perturbed questions ({what}; bench/quality_perturb.py):", "",
           "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for engine in _engines(data):
        rows = data[engine].get(key, {})
        out.append(f"| {engine} | " + " | ".join(
            _f(rows[p][metric]) if p in rows else "–" for p in PERTURBATIONS) + " |")
    return [*out, ""]


def _lme(res: dict[str, Any], split: str) -> list[str]:
    data = res["longmemeval_s"][split]
    name = "held-out" if split == "held" else "development"
    out = [f"#### LongMemEval_S — {name} set", ""]
    cols = ["recall_all@5", "ndcg_any@5", "recall_all@10", "ndcg_any@10", "recall_any@5",
            "recall_any@10"]
    out += ["| engine | protocol | n | " + " | ".join(cols) + " |", "|" + "---|" * (3 + len(cols))]
    names = {
        "official_session": "official, session (bench: all turns written, user turns asked for)",
        "upstream_session": "official, session, exactly as upstream (only user turns written)",
        "official_turn": "official, turn (bench)",
        "upstream_turn": "official, turn, exactly as upstream",
        "common_session_user_assistant":
            "common variant, session (user+assistant turns, gold answer_session_ids)",
    }
    for engine in _engines(data):
        for key, label in names.items():
            row = data[engine].get(key)
            if row is None:
                continue
            cells = " | ".join(_f(row.get(c, "")) for c in cols)
            out.append(f"| {engine} | {label} | {row['n']} | {cells} |")
    out.append("")
    out += ["Official session recall_all@5 by question type: " + "; ".join(
        f"{e}: " + ", ".join(f"{t} {_f(r['recall_all@5'])} (n={r['n']})"
                             for t, r in data[e]["official_session_by_type"].items())
        for e in data), ""]
    return [*out, *_perturbed(data, "perturbed_official_session",
                              "official session recall_all@5, bench protocol", "recall_all@5"),
            *_latency_table(data)]


def _met(ours: float, baselines: list[float], target: float | None) -> str:
    """Whether a headline row meets its target and beats every same-run baseline."""
    ahead = all(ours > b for b in baselines)
    if target is None:
        return "yes" if ahead else "**no**"
    return "yes" if ours >= target and ahead else "**no**"


def _headline(res: dict[str, Any]) -> list[str]:
    rows: list[list[str]] = []

    def row(label: str, results: list[dict[str, Any]], path: tuple[str, ...],
            target: float | None) -> None:
        values = []
        for r in results:
            v: Any = r
            for p in path:
                v = v.get(p, {}) if isinstance(v, dict) else {}
            values.append(v if isinstance(v, float | int) else None)
        if values[0] is None:
            return
        base = [v for v in values[1:] if v is not None]
        rows.append([label, *(_f(float(v)) if v is not None else "–" for v in values),
                     f"≥ {target:.2f}" if target is not None else "> both baselines",
                     _met(float(values[0]), [float(b) for b in base], target)])

    def latency(label: str, results: list[dict[str, Any]]) -> None:
        s = results[0]["latency_ms"]
        p50 = s["cpu_limit10"]["p50"]
        rows.append([f"{label} recall ms p50 / p99 (CPU, limit 10; wall {_lat(s, 'wall_limit10')})",
                     _lat(s, "cpu_limit10"),
                     *(_lat(r.get("latency_ms", {}), "cpu_limit10") for r in results[1:]),
                     "p50 ≤ 10", "yes" if p50 <= 10 else "**no**"])

    loc = res.get("locomo", {}).get("held")
    if loc and "service" in loc:
        rs = [loc.get(e, {}) for e in ENGINES]
        row("LoCoMo turn recall_any@5, categories 1–4", rs, ("turn", "overall_1_4",
                                                             "recall_any@5"), 0.72)
        row("… with all four perturbations", rs, ("perturbed_turn_1_4", "all", "recall_any@5"),
            0.66)
        for level, metric in (("turn", "recall_all@5"), ("turn", "ndcg_any@5"),
                              ("session", "recall_any@5"), ("session", "recall_all@5")):
            row(f"LoCoMo {level} {metric}, categories 1–4", rs, (level, "overall_1_4", metric),
                None)
        latency("LoCoMo", rs)
    lme = res.get("longmemeval_s", {}).get("held")
    if lme and "service" in lme:
        rs = [lme.get(e, {}) for e in ENGINES]
        row("LongMemEval_S official session recall_all@5 (bench protocol)", rs,
            ("official_session", "recall_all@5"), 0.90)
        row("LongMemEval_S official session recall_all@5, exactly as upstream (user turns "
            "only)", rs, ("upstream_session", "recall_all@5"), 0.88)
        row("LongMemEval_S common variant session recall_any@5", rs,
            ("common_session_user_assistant", "recall_any@5"), 0.98)
        for key, metric in (("official_session", "ndcg_any@5"),
                            ("official_session", "recall_all@10"),
                            ("official_turn", "recall_all@5"), ("upstream_turn", "recall_all@5"),
                            ("perturbed_official_session", "recall_all@5")):
            path = (key, "all", metric) if key.startswith("perturbed") else (key, metric)
            label = {"official_session": "official session", "official_turn": "official turn",
                     "upstream_turn": "official turn, exactly as upstream",
                     "perturbed_official_session": "official session, all four perturbations"
                     }[key]
            row(f"LongMemEval_S {label} {metric}", rs, path, None)
        latency("LongMemEval_S", rs)
    if not rows:
        return []
    out = ["### Headline (held-out set)", "",
           "| metric | Palimpsest (service) | BM25, space split (upstream) | BM25, lower-cased "
           "`\\w+` | target | met |", "|---|---|---|---|---|---|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    machine = res.get("machine")
    if isinstance(machine, dict):
        out += ["", "Machine during the runs: " + "; ".join(
            f"{name}: {info}" for name, info in machine.items()) + "."]
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
