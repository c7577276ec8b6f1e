"""In-process speed of the memory service: recall p50/p99 and remember throughput.

Usage: ``.venv/bin/python bench/service_inprocess.py [--sizes 10000,100000,1000000]``

For each size a fresh data directory is seeded through the service's own write path (bulk
import: changesets of 1,000 ``add_record`` ops each, projected and indexed exactly like single
writes), spread over 50 memories under one root. Then:

- ``recall`` at the root (51 memories in reach) and at one leaf, with 2–3 word ``text``
  queries drawn from stored records (so common words occur), ``limit`` 8;
- ``remember`` throughput through :meth:`MemoryService.remember` (one changeset and one
  transaction per write), measured in the same run against a same-run baseline: raw SQLite
  inserts of the same rows in one transaction each (the floor of the storage engine).

Prints one JSON document. Numbers go to docs/benchmarks.md. ``--keep DIR`` seeds each size
into ``DIR/records-<size>`` once and reuses it on later runs (recall and remember are then
measured on top of the kept records; remember adds to them).
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from palimpsest.service import MemoryService, history
from palimpsest.service.model import Caller, Op
from palimpsest.service.wire import merge_draft, record_draft

VOCAB = 20_000
MEMORIES = 50
BATCH = 1000


# Zipf (s = 1) over the vocabulary after the 50 most frequent ranks, which in real text are
# the stop words the analyzer drops: the commonest word is in a few percent of records.
_CUM = list(itertools.accumulate(1.0 / (rank + 51) for rank in range(VOCAB)))


def words(rng: random.Random, n: int) -> list[str]:
    """``n`` Zipf-distributed words ``w0`` (commonest) … ``w19999``."""
    return [f"w{i}" for i in rng.choices(range(VOCAB), cum_weights=_CUM, k=n)]


def seed(svc: MemoryService, caller: Caller, size: int, rng: random.Random
         ) -> tuple[str, list[str], list[str]]:
    root = svc.create_memory(caller, {"name": "root"})["id"]
    leaves = [svc.create_memory(caller, {"name": f"m{i}", "parent_id": root})["id"]
              for i in range(MEMORIES)]
    core = svc._core
    samples: list[str] = []
    done = 0
    while done < size:
        mid = leaves[(done // BATCH) % MEMORIES]
        n = min(BATCH, size - done)
        ops = []
        with svc._store.write():
            for _ in range(n):
                text = " ".join(words(rng, rng.randint(12, 30)))
                if rng.random() < 0.001:
                    samples.append(text)
                draft = record_draft({"content": text, "attributes": {"n": done}})
                parts = tuple(p.part for p in draft.content or ())
                body = merge_draft(None, draft, parts)
                if not body.text:
                    raise SystemExit("bench bug: a seeded record has no words")
                ops.append(Op("add_record", None, {
                    "record_id": f"hrec_b{done:09d}", "body_digest": core.seal(body),
                    **history.writer_payload(core.now_iso(), caller.writer)}))
                done += 1
            core.commit(mid, caller.writer, f"bulk-{done}", ops, "bulk import")
    return root, leaves, samples


def queries(rng: random.Random, samples: list[str], count: int) -> list[str]:
    out = []
    for _ in range(count):
        ws = rng.choice(samples).split()
        out.append(" ".join(rng.sample(ws, min(len(ws), rng.randint(2, 3)))))
    return out


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))]


def time_recall(svc: MemoryService, caller: Caller, mid: str, qs: list[str]) -> dict[str, Any]:
    for q in qs[:20]:  # warm the page cache
        svc.recall(caller, mid, {"text": q, "limit": 8})
    lat = []
    cpu = []
    for q in qs:
        t0 = time.perf_counter()
        c0 = time.thread_time()
        svc.recall(caller, mid, {"text": q, "limit": 8})
        cpu.append((time.thread_time() - c0) * 1000)
        lat.append((time.perf_counter() - t0) * 1000)
    # Wall time suffers from other processes on a shared machine; CPU time of this thread
    # (SQLite runs in it) does not, so both are reported.
    return {"p50_ms": round(statistics.median(lat), 2), "p99_ms": round(pct(lat, 0.99), 2),
            "cpu_p50_ms": round(statistics.median(cpu), 2),
            "cpu_p99_ms": round(pct(cpu, 0.99), 2), "queries": len(lat)}


def time_remember(svc: MemoryService, caller: Caller, mid: str, rng: random.Random,
                  n: int) -> tuple[float, float]:
    """Writes per second of wall time and of this thread's CPU time."""
    texts = [" ".join(words(rng, 20)) for _ in range(n)]
    t0 = time.perf_counter()
    c0 = time.thread_time()
    for text in texts:
        svc.remember(caller, mid, {"content": text})
    return n / (time.perf_counter() - t0), n / (time.thread_time() - c0)


def baseline_inserts(path: Path, rng: random.Random, n: int) -> float:
    """Same-run floor: one WAL transaction per row into a plain table and an FTS5 table."""
    db = sqlite3.connect(path / "baseline.db", isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT)")
    db.execute("CREATE VIRTUAL TABLE f USING fts5(text)")
    t0 = time.perf_counter()
    for i in range(n):
        text = " ".join(words(rng, 20))
        db.execute("BEGIN IMMEDIATE")
        db.execute("INSERT INTO t VALUES (?, ?)", (i, text))
        db.execute("INSERT INTO f(rowid, text) VALUES (?, ?)", (i, text))
        db.execute("COMMIT")
    rate = n / (time.perf_counter() - t0)
    db.close()
    return rate


def run(size: int, n_queries: int, n_writes: int, keep: Path | None = None) -> dict[str, Any]:
    """Seed ``size`` records (or reuse a directory seeded before under ``keep``) and measure."""
    rng = random.Random(size)
    with tempfile.TemporaryDirectory() as tmp:
        data = keep / f"records-{size}" if keep is not None else Path(tmp) / "data"
        meta = data / "bench-meta.json"
        svc = MemoryService(data)
        out: dict[str, Any] = {"records": size, "memories": MEMORIES + 1}
        if meta.exists():  # a kept directory: seeding a million records takes most of an hour
            member, root, leaves, samples = json.loads(meta.read_text("utf-8"))
            caller = svc.caller(member)
            out["reused_data_dir"] = str(data)
        else:
            made = svc.bootstrap_owner()
            assert made is not None
            caller = svc.caller(made[0].id)
            t0 = time.perf_counter()
            root, leaves, samples = seed(svc, caller, size, rng)
            out["seed_records_per_s"] = round(size / (time.perf_counter() - t0))
            if keep is not None:
                meta.write_text(json.dumps([made[0].id, root, leaves, samples]), "utf-8")
        qs = queries(rng, samples or ["w1 w2"], n_queries)
        out["recall_root"] = time_recall(svc, caller, root, qs)
        out["recall_leaf"] = time_recall(svc, caller, leaves[0], qs)
        out["baseline_sqlite_fts_inserts_per_s"] = round(baseline_inserts(Path(tmp), rng,
                                                                          n_writes))
        wall, cpu = time_remember(svc, caller, leaves[1], rng, n_writes)
        out["remember_per_s"] = round(wall)
        out["remember_per_cpu_s"] = round(cpu)
        svc.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--writes", type=int, default=1000)
    parser.add_argument("--keep", type=Path, default=None,
                        help="seed into (and later reuse) <keep>/records-<size>")
    args = parser.parse_args()
    results = [run(int(s), args.queries, args.writes, args.keep)
               for s in args.sizes.split(",")]
    print(json.dumps({"benchmark": "service_inprocess", "results": results}, indent=2))


if __name__ == "__main__":
    main()
