"""Cost of the `pal mcp` repository-memory recall tool against the library call, same run.

    .venv/bin/python bench/repo_mcp.py [--memories N] [--rounds N]

Builds a repository with N signed memories by one trusted actor, then measures (median wall and
CPU milliseconds over the rounds, warm index):

- baseline: ``hn.recall.recall`` for the default request (what ``pal memory recall`` runs);
- tool: the ``repo_memory_recall`` handler (request resolution, the same recall, the writers of
  the page read from the index with hash and signature re-checked, and the fenced rendering);
- for scale: ``store.collect`` (verifying every stream), which the writers would cost if taken
  from the refs instead of the index.

Prints one JSON document.
"""

from __future__ import annotations

import argparse
import json
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

from palimpsest.hn import store  # noqa: E402
from palimpsest.hn.reading import request_at  # noqa: E402
from palimpsest.hn.recall import recall  # noqa: E402
from palimpsest.identity import identity_from_seed  # noqa: E402
from palimpsest.mcp.handlers import ToolEnv, repo_memory_recall  # noqa: E402


def _measure(fn: Callable[[], Any], rounds: int) -> dict[str, float]:
    wall: list[float] = []
    cpu: list[float] = []
    for _ in range(rounds):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append((time.perf_counter() - t0) * 1000)
        cpu.append((time.process_time() - c0) * 1000)
    return {
        "wall_ms": round(statistics.median(wall), 2),
        "cpu_ms": round(statistics.median(cpu), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--memories", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=20)
    opts = parser.parse_args()
    alice = identity_from_seed("Alice Agent", bytes(range(32)))
    repo = new_repo(Path(tempfile.mkdtemp()) / "repo", trusted=[alice])
    for i in range(opts.memories):
        stamp = f"2026-01-01T{i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}Z"
        remember(repo, alice, f"note {i} about stream isolation", timestamp=stamp)
    # the handler needs no service: repo tools read only the repository
    env = ToolEnv(None, None, repo=str(store.git_dir(repo)))  # type: ignore[arg-type]
    request = request_at(repo, {})
    recall(repo, request)
    repo_memory_recall(env, {})
    print(json.dumps({
        "memories": opts.memories,
        "baseline_library_recall": _measure(lambda: recall(repo, request), opts.rounds),
        "repo_memory_recall_tool": _measure(lambda: repo_memory_recall(env, {}), opts.rounds),
        "store_collect_for_scale": _measure(lambda: store.collect(repo), max(3, opts.rounds // 4)),
    }))


if __name__ == "__main__":
    main()
