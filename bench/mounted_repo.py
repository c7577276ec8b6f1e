"""What reading a mounted repository through the service costs, against baselines measured in
the same run (service/mounts.py, docs/service.md "Repository memory in the service").

    .venv/bin/python bench/mounted_repo.py [--memories N] [--rounds N]

One repository with N signed memories (Alice trusted by policy) mounted into an in-process
`MemoryService`, and a built-in memory holding the same N texts:

- `repo_warm`: the repository's own warm recall (what `pal memory recall --query` runs, no Git),
  the baseline of the seam;
- `mounted`: `MemoryService.recall` on the mounted memory, same words (the seam: access, one
  warm recall, mapping to records);
- `builtin`: `MemoryService.recall` on the built-in memory, same words (the store's BM25);
- `both`: one question at a parent over the built-in memory and the mount;
- `after_append`: the first mounted recall after one memory was appended (the index brought up
  to date through Git), then the next one (warm again).

Prints one JSON document with p50/p95 in milliseconds and the machine's load.
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

from tests.hn.helpers import ALICE  # noqa: E402
from tests.hn.recall_helpers import head, new_repo, remember  # noqa: E402

from palimpsest.hn.recall.request import normalize_request  # noqa: E402
from palimpsest.hn.recall.warm import recall_kept  # noqa: E402
from palimpsest.hn.store import headfiles  # noqa: E402
from palimpsest.service import MemoryService  # noqa: E402

WORDS = ("deploy", "release", "branch", "verify", "stream", "policy", "index", "review")


def _ms(run: Callable[[], Any], rounds: int) -> dict[str, float]:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        run()
        times.append((time.perf_counter() - start) * 1000)
    times.sort()
    return {"p50": round(statistics.median(times), 3),
            "p95": round(times[min(len(times) - 1, int(len(times) * 0.95))], 3)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--memories", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=50)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="mounted-bench-"))
    repo = new_repo(root / "repo", [ALICE])
    texts = [f"note {i} about {WORDS[i % len(WORDS)]} and {WORDS[(i * 3) % len(WORDS)]}"
             for i in range(args.memories)]
    for text in texts:
        remember(repo, ALICE, text)
    svc = MemoryService(root / "data")
    made = svc.bootstrap_owner()
    assert made is not None
    owner = svc.authenticate(made[1])
    parent = svc.create_memory(owner, {"name": "All"})["id"]
    builtin = svc.create_memory(owner, {"name": "Builtin", "parent_id": parent})["id"]
    for text in texts:
        svc.remember(owner, builtin, {"type": "note", "content": text})
    mounted = svc.create_memory(owner, {"name": "Repo", "parent_id": parent})["id"]
    start = time.perf_counter()
    svc.mount_repository(mounted, root / "repo")
    mount_ms = (time.perf_counter() - start) * 1000
    body = {"text": "deploy", "limit": 10}
    git = headfiles.locate(root / "repo")
    assert git is not None
    request = normalize_request(at_commit=head(repo), query="deploy", max_records=10)
    assert recall_kept(git, request) is not None  # warm
    served = svc.recall(owner, mounted, body)["results"]
    assert served, "the mounted memory answered nothing"
    out: dict[str, Any] = {
        "memories": args.memories, "rounds": args.rounds, "mount_ms": round(mount_ms, 1),
        "repo_warm": _ms(lambda: recall_kept(git, request), args.rounds),
        "mounted": _ms(lambda: svc.recall(owner, mounted, body), args.rounds),
        "builtin": _ms(lambda: svc.recall(owner, builtin, body), args.rounds),
        "both": _ms(lambda: svc.recall(owner, parent, body), args.rounds),
    }
    appended = []
    for i in range(5):
        remember(repo, ALICE, f"appended {i} about deploy release")
        start = time.perf_counter()
        svc.recall(owner, mounted, body)
        first = (time.perf_counter() - start) * 1000
        start = time.perf_counter()
        svc.recall(owner, mounted, body)
        appended.append((first, (time.perf_counter() - start) * 1000))
    out["after_append"] = {
        "first_p50": round(statistics.median(a for a, _ in appended), 3),
        "next_p50": round(statistics.median(b for _, b in appended), 3)}
    out["load"] = os.getloadavg()
    out["cpus"] = os.cpu_count()
    svc.close()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
