"""Speed of Memory Git in process: commits, the reviewed merge, and reading at a head.

Usage: ``.venv/bin/python bench/memory_git.py [--sizes 50,200,800]``

For each size N a fresh data directory gets one memory; an agent commits N changesets (one
``add_memory`` each) to its own ref with compare-and-swap, proposes, a person reviews and
merges with a signed authorization (a fast-forward: the merge projects all N changesets into
records and the search index in one transaction). Measured:

- ``commit``: one changeset on an owned ref (validate twice, seal, CAS);
- ``merge``: authorize + verify + nonce + CAS + projection of the N merged changesets;
- ``context``: ``context_at`` on ``refs/shared/main`` (replays the N changesets from scratch,
  verifying each digest), against a same-run baseline: the UHP ``list_records`` read of the same
  accepted memory from its materialised projection.

Prints one JSON document; numbers go to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from palimpsest.service.memories import MemoryService
from palimpsest.service.memorygit.mergeauth import KeyRing
from palimpsest.service.memorygit.wiring import open_flow


def _ms(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    return {"p50_ms": round(statistics.median(ordered) * 1000, 3),
            "p95_ms": round(p95 * 1000, 3)}


def run(size: int, rounds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp, MemoryService(Path(tmp) / "data") as svc:
        person = svc.create_member("person", "human")
        agent = svc.create_member("agent", "agent")
        owner = svc.caller(person.id)
        mem = svc.create_memory(owner, {"name": "bench"})["id"]
        svc.put_grant(owner, mem, {"principal": f"member:{agent.id}",
                                   "privileges": ["read", "write"]})
        flow = open_flow(svc, ring=KeyRing({"bench": b"b" * 32}))
        a, p = f"member:{agent.id}", f"member:{person.id}"
        root = flow.git.init(p, mem)["ref"]["head_changeset_id"]
        ref = f"refs/agents/{agent.id}/main"
        flow.git.create_branch(a, mem, {"ref_name": ref, "head_changeset_id": root})
        head, commits = root, []
        for i in range(size):
            started = time.perf_counter()
            cs, _ = flow.git.create_changeset(a, {
                "project_id": mem, "ref_name": ref, "expected_head": head,
                "idempotency_key": f"k{i}",
                "ops": [{"op_type": "add_memory",
                         "payload": {"content": f"observation number {i} about topic {i % 17}",
                                     "kind": "fact", "tags": [f"t{i % 5}"]}}]})
            commits.append(time.perf_counter() - started)
            head = cs["changeset_id"]
        prop, _ = flow.propose(a, mem, {"source_ref": ref, "idempotency_key": "p"})
        flow.review(p, prop["proposal_id"], {"verdict": "approve"})
        started = time.perf_counter()
        flow.merge(p, mem, flow.authorize(p, prop["proposal_id"], {}))
        merge_s = time.perf_counter() - started
        context, listing = [], []
        for _ in range(rounds):
            started = time.perf_counter()
            got = flow.git.context_at(p, mem, {"query": "topic 3", "limit": 20})
            context.append(time.perf_counter() - started)
            started = time.perf_counter()
            listed = svc.list_records(owner, mem, limit=20)
            listing.append(time.perf_counter() - started)
        assert got["total_active"] == size and len(listed["data"]) == 20
        return {"changesets": size, "commit": _ms(commits), "merge_ms": round(merge_s * 1000, 3),
                "context_at": _ms(context), "baseline_list_records": _ms(listing)}


def main() -> None:
    """Run every size and print the JSON result."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="50,200,800")
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    results = [run(int(n), args.rounds) for n in args.sizes.split(",")]
    print(json.dumps({"bench": "memory_git", "results": results}, indent=2))


if __name__ == "__main__":
    main()
