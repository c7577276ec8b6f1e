"""Cost of `pal memory prime` against one default recall, same run.

    .venv/bin/python bench/repo_prime.py [--per-kind N] [--rounds N] [--budget T]...

Builds a repository with N signed memories of each of handoff, decision, verification and
observation by one trusted actor, warms the index, then measures (median wall and CPU ms):
``hn.prime.prime`` at each budget (default 4,000, 15,000 and 1,000,000 tokens) beside the
baseline ``hn.recall.recall`` of the default request (20 records) that a session would
otherwise start with. Also reports how many memories each budget placed per section and the
machine's load. Prints one JSON document.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.hn.recall_helpers import new_repo, remember  # noqa: E402

from palimpsest.hn import prime, store  # noqa: E402
from palimpsest.hn.envelope import Handoff  # noqa: E402
from palimpsest.hn.reading import request_at  # noqa: E402
from palimpsest.hn.recall import recall  # noqa: E402
from palimpsest.identity import identity_from_seed  # noqa: E402

KINDS = ("handoff", "decision", "verification", "observation")


def _measure(fn: Callable[[], Any], rounds: int) -> dict[str, float]:
    samples = []
    for _ in range(rounds):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        samples.append(((time.perf_counter() - t0) * 1000, (time.process_time() - c0) * 1000))
    return {"wall_ms": round(statistics.median(s[0] for s in samples), 2),
            "cpu_ms": round(statistics.median(s[1] for s in samples), 2), "runs": rounds}


def _repo(per_kind: int) -> Any:
    alice = identity_from_seed("Alice Agent", bytes(range(32)))
    repo = new_repo(Path(tempfile.mkdtemp()) / "repo", trusted=[alice])
    head = str(repo.head.target)
    for i in range(per_kind * len(KINDS)):
        kind = KINDS[i % len(KINDS)]
        remember(repo, alice, f"{kind} {i}: " + "a sentence of context " * 8, kind=kind,
                 timestamp=f"2026-01-01T{i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}Z",
                 evidence=(f"git:{head}",) if kind == "verification" else (),
                 handoff=Handoff((f"done {i}",), (), (f"blocked {i}",), (f"next {i}",))
                 if kind == "handoff" else None)
    return repo


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--per-kind", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--budget", type=int, action="append", default=[])
    opts = parser.parse_args()
    budgets = opts.budget or [4000, 15000, 1_000_000]
    repo = _repo(opts.per_kind)
    at = store.resolve_commit(repo, "HEAD")
    request = request_at(repo, {})
    recall(repo, request)  # build the index once
    out: dict[str, Any] = {
        "per_kind": opts.per_kind,
        "load_average_start": [round(v, 2) for v in os.getloadavg()],
        "baseline_default_recall": _measure(lambda: recall(repo, request), opts.rounds),
        "prime": {},
    }
    for budget in budgets:
        placed = [s["returned"] for s in json.loads(prime.prime(repo, at, budget))["sections"]]
        out["prime"][str(budget)] = {
            **_measure(lambda b=budget: prime.prime(repo, at, b), opts.rounds),
            "placed": dict(zip([k for _, k in prime.SECTIONS], placed, strict=True)),
        }
    out["load_average_end"] = [round(v, 2) for v in os.getloadavg()]
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
