"""Cost of the `pal mcp` repository-memory tools against the library calls, same run.

    .venv/bin/python bench/repo_mcp.py [--memories N] [--rounds N]
    .venv/bin/python bench/repo_mcp.py --store DIR [--topic T] [--pattern P] [--rounds N]

Without ``--store`` it builds a repository with N signed memories by one trusted actor.  With
``--store`` it uses an existing repository (e.g. one kept by ``bench/repo_memory.py --keep``;
its HEAD branch gets new code commits).  Measured, median wall and CPU milliseconds:

- warm: ``hn.recall.recall`` for the default request (what ``pal memory recall`` runs through
  Git) beside the ``repo_memory_recall`` handler (request resolution, the same recall, the
  writers of the page read from the index with hash and signature re-checked, the fenced
  rendering) and, with ``--pattern``, ``repo_memory_grep`` beside ``hn.recall.grep``;
- after a commit (``--store`` only): the first tool call after a code commit moves HEAD, beside
  the first library recall after another such commit (alternating);
- for scale (without ``--store``): ``store.collect`` (verifying every stream), which the writers
  would cost if taken from the refs instead of the index.

Prints one JSON document.
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

from hn_gen import advance  # noqa: E402
from tests.hn.recall_helpers import new_repo, remember  # noqa: E402

from palimpsest.hn import store  # noqa: E402
from palimpsest.hn.reading import request_at  # noqa: E402
from palimpsest.hn.recall import grep, recall  # noqa: E402
from palimpsest.identity import identity_from_seed  # noqa: E402
from palimpsest.mcp.handlers import ToolEnv, repo_memory_grep, repo_memory_recall  # noqa: E402


def _times(fn: Callable[[], Any]) -> tuple[float, float]:
    t0, c0 = time.perf_counter(), time.process_time()
    fn()
    return (time.perf_counter() - t0) * 1000, (time.process_time() - c0) * 1000


def _summary(samples: list[tuple[float, float]]) -> dict[str, float]:
    return {
        "wall_ms": round(statistics.median(s[0] for s in samples), 2),
        "cpu_ms": round(statistics.median(s[1] for s in samples), 2),
        "runs": len(samples),
    }


def _measure(fn: Callable[[], Any], rounds: int) -> dict[str, float]:
    return _summary([_times(fn) for _ in range(rounds)])


def _small_repo(memories: int) -> Any:
    alice = identity_from_seed("Alice Agent", bytes(range(32)))
    repo = new_repo(Path(tempfile.mkdtemp()) / "repo", trusted=[alice])
    for i in range(memories):
        stamp = f"2026-01-01T{i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}Z"
        remember(repo, alice, f"note {i} about stream isolation", timestamp=stamp)
    return repo


def _after_commit(repo: Any, env: ToolEnv, rounds: int) -> dict[str, Any]:
    """First calls after a commit moving HEAD: the tool and the library, alternating."""
    tool, library = [], []
    for n in range(rounds):
        advance(repo, f"mcp bench {time.time_ns()} {n}\n")
        tool.append(_times(lambda: repo_memory_recall(env, {})))
        head = advance(repo, f"mcp bench {time.time_ns()} {n} library\n")
        at = {"atCommit": head}
        library.append(_times(lambda: recall(repo, request_at(repo, at))))  # noqa: B023
    return {"repo_memory_recall_tool": _summary(tool), "library_recall": _summary(library)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--memories", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--store", default="", help="an existing repository to measure")
    parser.add_argument("--topic", default="", help="topic filter of the grep measurement")
    parser.add_argument("--pattern", default="", help="measure repo_memory_grep with this regex")
    opts = parser.parse_args()
    repo = store.open_repository(opts.store) if opts.store else _small_repo(opts.memories)
    # the handler needs no service: repo tools read only the repository
    env = ToolEnv(None, None, repo=str(store.git_dir(repo)))
    request = request_at(repo, {})
    matched = recall(repo, request).matched
    repo_memory_recall(env, {})
    out: dict[str, Any] = {
        "memories": opts.memories if not opts.store else None,
        "store": opts.store or None,
        "load_average_start": [round(v, 2) for v in os.getloadavg()],
        "default_matched": matched,
        "warm": {
            "library_recall": _measure(lambda: recall(repo, request), opts.rounds),
            "repo_memory_recall_tool": _measure(lambda: repo_memory_recall(env, {}), opts.rounds),
        },
    }
    if opts.pattern:
        args: dict[str, Any] = {"pattern": opts.pattern}
        if opts.topic:
            args["topic"] = [opts.topic]
        grep_request = request_at(repo, {k: v for k, v in args.items() if k != "pattern"})
        raw = opts.pattern.encode()
        found = grep(repo, grep_request, raw, ignore_case=False)
        out["warm"]["grep_matched"] = found.matched
        out["warm"]["library_grep"] = _measure(
            lambda: grep(repo, grep_request, raw, ignore_case=False), opts.rounds)  # fmt: skip
        out["warm"]["repo_memory_grep_tool"] = _measure(
            lambda: repo_memory_grep(env, args), opts.rounds)  # fmt: skip
    if opts.store:
        out["after_commit"] = _after_commit(repo, env, max(3, opts.rounds // 4))
    else:
        out["store_collect_for_scale"] = _measure(lambda: store.collect(repo),
                                                  max(3, opts.rounds // 4))  # fmt: skip
    out["load_average_end"] = [round(v, 2) for v in os.getloadavg()]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
