"""Benchmark the repo-memory reader and writer against baselines measured in the same run.

Prints one JSON object:
- ``reader``: full verification (``store.collect``) of N memories in one stream, as memories per
  second, next to the raw Ed25519 verify rate of pyca/cryptography over the same payloads and
  signatures in this process; ``ratio`` is reader / raw (the goal is >= 0.5).  From 2,048
  memories the reader hands the Ed25519 arithmetic to worker processes; set
  ``PAL_VERIFY_WORKERS=0`` for the single-process rate (bench/hn_verify.py reports both).
- ``record_process``: wall time of whole ``pal memory record`` processes (start to exit), next
  to a bare ``python -c pass`` start in the same run.

Usage: python bench/hn_store.py [N] [RECORD_RUNS] [ROUNDS] [--packed]   (100000, 5, 3)
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pygit2
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from palimpsest.canonical import encode
from palimpsest.hn import store
from palimpsest.hn.envelope import default_stream, memory_id, sign_text
from palimpsest.identity import b64_nopad_decode, identity_from_seed, save_identity

ALICE = identity_from_seed("Bench Agent", bytes(range(32)))


def build(path: Path, count: int) -> str:
    """One stream of ``count`` realistic records written straight through pygit2."""
    repo = pygit2.init_repository(str(path), initial_head="main")
    who = pygit2.Signature("Bench", "bench@hn.invalid", 1_700_000_000, 0)
    builder = repo.TreeBuilder()
    builder.insert("README.md", repo.create_blob(b"bench\n"), pygit2.enums.FileMode.BLOB)
    base = str(repo.create_commit("refs/heads/main", who, who, "base\n", builder.write(), []))
    stream = default_stream(ALICE.actor)
    parent: str | None = None
    previous = ""
    for seq in range(1, count + 1):
        wire: dict[str, object] = {
            "protocol": "hn-memory/0", "operation": "record", "actor": ALICE.actor,
            "actorName": ALICE.name, "publicKey": ALICE.public_key_text, "stream": stream,
            "sequence": seq, "timestamp": f"2026-08-30T12:{seq // 60 % 60:02d}:{seq % 60:02d}Z",
        }  # fmt: skip
        if previous:
            wire["previous"] = previous
        wire["record"] = {
            "kind": "decision",
            "content": f"Decision {seq}: keep memory streams separate; verify isolation "
            "in recall and keep the private index rebuildable from refs.",
            "anchor": {"commit": base},
            "applicability": {"mode": "descendants"},
            "topics": ["architecture", "memory"],
            "evidence": [f"git:{base}"],
        }
        payload = encode(wire)
        parent = store.write_memory_objects(
            repo, payload, sign_text(ALICE.sign(payload)), author=ALICE.name,
            actor=ALICE.actor, timestamp=str(wire["timestamp"]), parent=parent,
        )  # fmt: skip
        previous = memory_id(payload)
    assert parent is not None
    repo.references.create(store.local_ref_name(ALICE.actor, stream), pygit2.Oid(hex=parent))
    save_identity(Path(repo.path), ALICE)
    return base


def raw_verify_rate(path: Path) -> float:
    """pyca/cryptography verifying the repository's own (payload, signature) pairs: the same
    messages the reader checks, read beforehand so only the verify calls are timed."""
    repo = store.open_repository(path)
    key = Ed25519PublicKey.from_public_bytes(ALICE.public_key)
    samples = [(m.payload, b64_nopad_decode(m.signature, 64, "s")) for m in store.collect(repo)]
    start = time.perf_counter()
    for payload, signature in samples:
        key.verify(signature, payload)
    return len(samples) / (time.perf_counter() - start)


def reader_rate(path: Path) -> tuple[float, int]:
    repo = store.open_repository(path)
    start = time.perf_counter()
    memories = store.collect(repo)
    return len(memories) / (time.perf_counter() - start), len(memories)


def timed(cmd: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    packed = "--packed" in sys.argv
    with tempfile.TemporaryDirectory(prefix="pal-bench-") as tmp:
        path = Path(tmp) / "repo"
        t0 = time.perf_counter()
        build(path, count)
        if packed:
            subprocess.run(["git", "-C", str(path), "gc", "-q"], check=True)
        build_seconds = time.perf_counter() - t0
        # The machine is shared: alternate the two measurements and keep each one's best round.
        raws, rates = [], []
        for _ in range(rounds):
            raws.append(raw_verify_rate(path))
            rate, loaded = reader_rate(path)
            rates.append(rate)
        raw, rate = max(raws), max(rates)
        pal = str(Path(sys.executable).with_name("pal"))
        record = [pal, "memory", "record", "--kind", "observation", "--at", "HEAD",
                  "--applies", "exact", "--json", "bench"]  # fmt: skip
        env_ok = os.access(pal, os.X_OK)
        record_times = [timed(record, path) for _ in range(runs)] if env_ok else []
        bare = [timed([sys.executable, "-c", "pass"], path) for _ in range(runs)]
    result = {
        "benchmark": "hn_store",
        "memories": loaded,
        "object_store": "packed (git gc)" if packed else "loose objects",
        "build_seconds": round(build_seconds, 2),
        "reader": {
            "memories_per_second": round(rate),
            "raw_ed25519_verifies_per_second": round(raw),
            "ratio": round(rate / raw, 3),
            "goal_ratio": 0.5,
        },
        "record_process": {
            "median_seconds": round(statistics.median(record_times), 3) if record_times else None,
            "max_seconds": round(max(record_times), 3) if record_times else None,
            "bare_python_median_seconds": round(statistics.median(bare), 3),
            "goal_seconds": 0.3,
        },
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
