"""Full verification of a loose-object repo-memory store, before and after, interleaved.

For each size it builds one store of signed memories across four actors (loose objects, never
packed, as a user's store is after appends), then runs, round after round and in this order,
one child process per variant:

- ``before``: ``store.collect`` of the source tree at ``--baseline`` (exported with
  ``git archive``);
- ``after-1core``: this tree with ``PAL_VERIFY_WORKERS=0`` (everything in one process);
- ``after``: this tree as shipped (automatic worker processes for the Ed25519 arithmetic).

Each child verifies the whole store and then runs pyca/cryptography Ed25519 verification over
the same payloads and signatures (the "raw" rate), so every ratio compares two measurements of
one process a moment apart.  It reports wall and CPU time: the reader's own CPU, the CPU of its
worker processes, and the ratios ``raw_rate / reader_rate`` in wall time, in the reader's CPU
and in total CPU (reader + workers).  The medians over rounds are printed as one JSON document.

Usage: python bench/hn_verify.py [--sizes 10000,100000] [--rounds 3] [--baseline e4c2359]
       [--workdir DIR] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
WORDS = [a + b + c for a in "kmnrstvp" for b in "aeiou" for c in "dlrsxz"] + [
    "stream", "isolation", "index", "recall", "verify", "signature", "policy", "anchor",
    "東京", "café", "résumé", "<tag>", "a&b",
]  # fmt: skip
KINDS = ["observation", "decision", "verification", "attempt", "handoff", "assumption"]


def build(path: Path, count: int) -> None:
    """``count`` signed memories over four actors, written as loose objects."""
    import pygit2

    from palimpsest.hn import store
    from palimpsest.hn.envelope import (
        PROTOCOL,
        Anchor,
        Applicability,
        Envelope,
        Handoff,
        Record,
        default_stream,
        encode_envelope,
        memory_id,
        sign_text,
    )  # fmt: skip
    from palimpsest.identity import identity_from_seed

    actors = [identity_from_seed(f"Agent {i}", bytes(range(i * 32, i * 32 + 32))) for i in range(4)]
    repo = pygit2.init_repository(str(path), initial_head="main")
    who = pygit2.Signature("Bench", "bench@hn.invalid", 1_700_000_000, 0)
    tree = repo.TreeBuilder()
    tree.insert("README.md", repo.create_blob(b"bench\n"), pygit2.enums.FileMode.BLOB)
    base = str(repo.create_commit("refs/heads/main", who, who, "base\n", tree.write(), []))
    rng = random.Random(count)
    heads: dict[str, tuple[str | None, int, str]] = {a.actor: (None, 1, "") for a in actors}
    records: dict[str, list[str]] = {a.actor: [] for a in actors}
    for clock in range(1, count + 1):
        actor = actors[rng.randrange(4)]
        parent, sequence, previous = heads[actor.actor]
        own = records[actor.actor]
        roll = rng.random()
        operation, target, reason, record = "record", "", "", None
        if own and roll < 0.02:
            operation, target, reason = "retract", own.pop(rng.randrange(len(own))), "incorrect"
        else:
            if own and roll < 0.07:
                operation, target = "supersede", own.pop(rng.randrange(len(own)))
            kind = rng.choice(KINDS)
            words = rng.choices(WORDS, k=rng.randint(15, 80))
            record = Record(
                kind, " ".join(words), Anchor(base), Applicability("descendants"),
                tuple(sorted({f"topic-{rng.randrange(50):02d}" for _ in range(rng.randint(1, 3))})),
                (f"git:{base}",) if kind == "verification" else (),
                "failed" if kind == "attempt" else "",
                Handoff(next_actions=(" ".join(words[:6]),)) if kind == "handoff" else None,
            )  # fmt: skip
        stamp = f"2026-09-{1 + clock // 86400:02d}T{clock // 3600 % 24:02d}:"
        stamp += f"{clock // 60 % 60:02d}:{clock % 60:02d}Z"
        envelope = Envelope(
            PROTOCOL, operation, actor.actor, actor.name, actor.public_key_text,
            default_stream(actor.actor), sequence, stamp, previous, record, target, reason,
        )  # fmt: skip
        payload = encode_envelope(envelope)
        commit = store.write_memory_objects(
            repo, payload, sign_text(actor.sign(payload)), author=actor.name,
            actor=actor.actor, timestamp=stamp, parent=parent,
        )  # fmt: skip
        heads[actor.actor] = (commit, sequence + 1, memory_id(payload))
        if record is not None:
            own.append(memory_id(payload))
    for actor in actors:
        head = heads[actor.actor][0]
        if head is not None:
            name = store.local_ref_name(actor.actor, default_stream(actor.actor))
            repo.references.create(name, pygit2.Oid(hex=head))


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(path: Path) -> dict[str, Any]:
    """Run in a child: verify the store, then raw Ed25519 over the same payloads."""
    import base64

    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    import palimpsest
    from palimpsest.hn import store

    repo = store.open_repository(path)
    wall, cpu, child = time.perf_counter(), time.process_time(), _children_cpu()
    memories = store.collect(repo)
    wall = time.perf_counter() - wall
    cpu = time.process_time() - cpu
    child = _children_cpu() - child
    samples = [
        (base64.b64decode(m.envelope.public_key + "="), m.payload,
         base64.b64decode(m.signature + "=="))
        for m in memories
    ]  # fmt: skip
    keys = {raw: Ed25519PublicKey.from_public_bytes(raw) for raw, _p, _s in samples}
    raw_wall, raw_cpu = time.perf_counter(), time.process_time()
    for raw, payload, signature in samples:
        keys[raw].verify(signature, payload)
    raw_wall = time.perf_counter() - raw_wall
    raw_cpu = time.process_time() - raw_cpu
    n = len(memories)
    return {
        "source": str(Path(palimpsest.__file__).parents[1]),
        "memories": n,
        "reader_per_s_wall": n / wall,
        "reader_per_s_cpu": n / cpu,
        "worker_cpu_s": child,
        "raw_per_s_wall": n / raw_wall,
        "raw_per_s_cpu": n / raw_cpu,
        "ratio_wall": raw_wall / wall,
        "ratio_reader_cpu": raw_cpu / cpu,
        "ratio_total_cpu": raw_cpu / (cpu + child),
    }


def _export(rev: str, into: Path) -> Path:
    data = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "src"], check=True, capture_output=True
    ).stdout
    with tarfile.open(fileobj=BytesIO(data)) as archive:
        archive.extractall(into, filter="data")
    return into / "src"


def measure_child(source: Path, store_path: Path, workers: str | None) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(source))
    env.pop("PAL_VERIFY_WORKERS", None)
    if workers is not None:
        env["PAL_VERIFY_WORKERS"] = workers
    out = subprocess.run(
        [sys.executable, __file__, "--measure", str(store_path)],
        check=True, capture_output=True, env=env, text=True,
    ).stdout  # fmt: skip
    result: dict[str, Any] = json.loads(out)
    if Path(result["source"]).resolve() != source.resolve():
        raise RuntimeError(f"child imported {result['source']}, not {source}")
    return result


def _median(runs: list[dict[str, Any]]) -> dict[str, Any]:
    keys = [k for k, v in runs[0].items() if isinstance(v, float)]
    out: dict[str, Any] = {k: round(statistics.median(r[k] for r in runs), 3) for k in keys}
    out["ratio_wall_all_rounds"] = [round(r["ratio_wall"], 3) for r in runs]
    out["ratio_reader_cpu_all_rounds"] = [round(r["ratio_reader_cpu"], 3) for r in runs]
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10000")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline", default="e4c2359")
    parser.add_argument("--workdir")
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--measure")
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(Path(args.measure))))
        return
    work = Path(args.workdir or tempfile.mkdtemp(prefix="pal-hnverify-"))
    work.mkdir(parents=True, exist_ok=True)
    variants = [
        ("before", _export(args.baseline, work / "baseline"), None),
        ("after-1core", ROOT / "src", "0"),
        ("after", ROOT / "src", None),
    ]
    results = []
    for size in (int(s) for s in args.sizes.split(",")):
        store_path = work / f"store-{size}"
        start = time.perf_counter()
        if not store_path.exists():
            build(store_path, size)
        built = time.perf_counter() - start
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name, _s, _w in variants}
        load = [os.getloadavg()]
        for _ in range(args.rounds):
            for name, source, workers in variants:
                runs[name].append(measure_child(source, store_path, workers))
        load.append(os.getloadavg())
        results.append({
            "memories": runs["after"][0]["memories"],
            "object_store": "loose objects",
            "build_seconds": round(built, 1),
            "rounds": args.rounds,
            "usable_cpus": len(os.sched_getaffinity(0)),
            "load_average_start_end": [[round(x, 2) for x in la] for la in load],
            "variants": {name: _median(r) for name, r in runs.items()},
        })  # fmt: skip
        print(json.dumps(results[-1]), file=sys.stderr, flush=True)
        if not args.keep:
            subprocess.run(["rm", "-rf", str(store_path)], check=True)
    print(json.dumps({"benchmark": "hn_verify", "baseline": args.baseline, "sizes": results},
                     indent=2))  # fmt: skip
    if not args.keep:
        subprocess.run(["rm", "-rf", str(work)], check=True)


if __name__ == "__main__":
    main()
