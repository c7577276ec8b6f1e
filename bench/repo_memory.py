"""Repo-memory benchmark: append, verification, index, recall, grep and one CLI record.

For each store size (default 1k, 10k and 100k signed memories across four actors) it prints one
JSON object per size on stdout (and all of them at the end as one JSON document) with:

- ``append_per_s``: in-process appends through the core writer (``store.append_memory``: blobs,
  tree, commit, compare-and-swap) including signing;
- ``verify``: full verification of every stream (``store.collect``) in memories/s, beside the raw
  Ed25519 verification rate of pyca/cryptography measured in the same run on the same payloads,
  and their ratio (target >= 0.5);
- ``index_rebuild_s``: ``pal memory index rebuild`` work in-process (verify + project + write);
- ``incremental_update_ms``: bringing the index up to date after one more append (median of 5);
- ``recall_ms`` / ``grep_ms``: p50 and p99 of typical warm queries, in-process, beside a
  baseline ``SELECT 1`` round trip on the same SQLite connection;
- ``record_process_s``: wall time of whole ``pal memory record`` processes (median of 5),
  beside a bare ``python -c pass`` start.

Then the upstream 10k store ``../shared/interop/hn-memory-v0-scale/fixture.bundle`` (verification
rate, index rebuild, recall), when it is present.

Usage: python bench/repo_memory.py [--quick] [--sizes 1000,10000,100000] [--out FILE]
[--no-upstream] [--keep DIR] [--queries-only]
(``--quick`` = 1k and 10k only).  Generation time is reported but is not a target.
``--keep DIR`` generates each store as ``DIR/store-<size>`` and keeps it; a complete store found
there is reused instead (its append rate is the one measured when it was generated; a full run
appends a few memories to it).  ``--queries-only`` runs only the warm recall and grep queries
(each with wall and CPU p50/p99 and ``matched``) and reports the index size; the first open
rebuilds the index if its format changed, timed as ``index_open_s``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import pygit2
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

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
)
from palimpsest.hn.index import IndexContext, open_index
from palimpsest.hn.recall import grep, recall
from palimpsest.hn.recall.request import normalize_request
from palimpsest.identity import Identity, identity_from_seed, save_identity

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("PAL_SHARED", ROOT.parent / "shared"))
ACTORS = [
    identity_from_seed(name, bytes(range(start, start + 32)))
    for name, start in (
        ("Alice Agent", 0),
        ("Bob Agent", 32),
        ("Carol Agent", 64),
        ("Dave Agent", 96),
    )
]
KINDS = ["observation", "decision", "verification", "attempt", "handoff", "assumption"]
_REAL_WORDS = " ".join(
    (
        "stream isolation index recall verify signature policy anchor commit handoff decision",
        "memory replication quarantine cursor bound topic lexical regex grep evidence lifecycle",
        "supersede retract challenge trust qualified actor kind projection applicability",
        "descendant exact subject path blob tree ref promote fetch sync shallow budget token",
        "digest fingerprint deterministic inert warning escape unicode 東京 café résumé",
    )
).split(" ")
_SYLLABLES = [a + b for a in "kmnrstvpdzfbg" for b in "aeiou"][:20]
# A Zipf-like vocabulary of 5,000 words: synthetic words plus the real ones spread over ranks
# 40..2,000, so query terms are as selective as in real notes (not all in half the records).
WORDS = [a + b + c for a in _SYLLABLES for b in _SYLLABLES for c in _SYLLABLES][:5000]
for _rank, _word in enumerate(_REAL_WORDS):
    WORDS[40 + _rank * 37] = _word
WEIGHTS = [1.0 / (rank + 10) for rank in range(len(WORDS))]
TOPICS = [f"topic-{i:02d}" for i in range(50)]


def _ms(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return {"p50": round(statistics.median(ordered) * 1000, 3), "p99": round(p99 * 1000, 3)}


def _timed(fn: Callable[[], Any], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def _timed_cpu(fn: Callable[[], Any], runs: int) -> dict[str, float]:
    """Wall p50/p99 and CPU (``time.process_time``) p50/p99 of ``runs`` calls, in ms."""
    wall, cpu = [], []
    for _ in range(runs):
        start, start_cpu = time.perf_counter(), time.process_time()
        fn()
        cpu.append(time.process_time() - start_cpu)
        wall.append(time.perf_counter() - start)
    cpu_ms = _ms(cpu)
    return {**_ms(wall), "cpu_p50": cpu_ms["p50"], "cpu_p99": cpu_ms["p99"]}


class Writer:
    """Appends signed memories through the core writer, tracking stream heads in memory.

    In ``bulk`` mode the objects are written with ``store.write_memory_objects`` and each
    stream's ref is moved with one compare-and-swap per :meth:`flush` (generation speed only;
    the append rate is measured in the normal mode, one CAS per memory).
    """

    def __init__(self, repo: pygit2.Repository, anchor: str) -> None:
        self.repo = repo
        self.anchor = anchor
        self.bulk = False
        self.flushed: dict[str, str | None] = {}
        self.heads: dict[str, store.StreamHead] = {}
        self.records: dict[str, list[str]] = {a.actor: [] for a in ACTORS}
        self.payloads: list[tuple[bytes, bytes, bytes]] = []
        self.clock = 0

    def append(self, who: Identity, rng: random.Random) -> str:
        self.clock += 1
        stamp = f"2026-09-{1 + self.clock // 86400:02d}T{self.clock // 3600 % 24:02d}:"
        stamp += f"{self.clock // 60 % 60:02d}:{self.clock % 60:02d}Z"
        stream = default_stream(who.actor)
        head = self.heads.get(who.actor) or store.stream_head(self.repo, who.actor, stream)
        own = self.records[who.actor]
        roll = rng.random()
        target, reason, operation, record = "", "", "record", None
        if own and roll < 0.02:
            operation, target, reason = "retract", own.pop(rng.randrange(len(own))), "incorrect"
        else:
            if own and roll < 0.07:
                operation, target = "supersede", own.pop(rng.randrange(len(own)))
            kind = rng.choice(KINDS)
            words = rng.choices(WORDS, weights=WEIGHTS, k=rng.randint(15, 80))
            record = Record(
                kind=kind,
                content=" ".join(words),
                anchor=Anchor(commit=self.anchor),
                applicability=Applicability("descendants"),
                topics=tuple(sorted(set(rng.sample(TOPICS, rng.randint(1, 3))))),
                evidence=(f"git:{self.anchor}",) if kind == "verification" else (),
                attempt_outcome="failed" if kind == "attempt" else "",
                handoff=Handoff(next_actions=(" ".join(words[:6]),)) if kind == "handoff" else None,
            )
        envelope = Envelope(
            protocol=PROTOCOL, operation=operation, actor=who.actor, actor_name=who.name,
            public_key=who.public_key_text, stream=stream, sequence=head.sequence,
            timestamp=stamp, previous=head.previous, record=record, target=target, reason=reason,
        )  # fmt: skip
        payload = encode_envelope(envelope)
        signature = who.sign(payload)
        if self.bulk:
            self.flushed.setdefault(head.ref, head.head)
            commit = store.write_memory_objects(
                self.repo, payload, sign_text(signature), author=who.name, actor=who.actor,
                timestamp=stamp, parent=head.head,
            )  # fmt: skip
        else:
            commit = store.append_memory(self.repo, payload, sign_text(signature), envelope, head)
        mid = memory_id(payload)
        self.heads[who.actor] = store.StreamHead(head.ref, commit, head.sequence + 1, mid)
        if record is not None:
            own.append(mid)
        if len(self.payloads) < 5000:
            self.payloads.append((who.public_key, payload, signature))
        return mid

    def flush(self) -> None:
        """Move every stream ref written in bulk mode to its newest commit (one CAS each)."""
        for ref, old in self.flushed.items():
            new = next(h.head for h in self.heads.values() if h.ref == ref)
            if new is not None:
                store.compare_and_swap(self.repo, ref, new, old)
        self.flushed = {}


def _init(path: Path) -> tuple[pygit2.Repository, str]:
    repo = pygit2.init_repository(str(path), initial_head="main")
    policy = {
        "version": "hn.policy/0",
        "maintainers": [ACTORS[0].actor],
        "proposals": {
            "requiredApprovals": 0, "requiredAccepts": 1, "trustedReviewers": [],
            "allowAuthorApproval": False,
        },
        "pipelines": {},
        "memory": {
            "trustedActors": sorted(a.actor for a in ACTORS[:3]), "trustedKinds": sorted(KINDS),
        },
    }  # fmt: skip
    index = pygit2.Index()
    for name, data in (("README.md", b"bench\n"), (".hn/policy.json", json.dumps(policy).encode())):
        index.add(pygit2.IndexEntry(name, repo.create_blob(data), pygit2.enums.FileMode.BLOB))
    who = pygit2.Signature("Bench", "bench@hn.invalid", 1_700_000_000, 0)
    commit = repo.create_commit("HEAD", who, who, "base", index.write_tree(repo), [])
    return repo, str(commit)


def _raw_verify_rate(samples: list[tuple[bytes, bytes, bytes]]) -> float:
    keys = {raw: Ed25519PublicKey.from_public_bytes(raw) for raw, _, _ in samples}
    start = time.perf_counter()
    for raw, payload, signature in samples:
        keys[raw].verify(signature, payload)
    return len(samples) / (time.perf_counter() - start)


def _samples(memories: Sequence[Any]) -> list[tuple[bytes, bytes, bytes]]:
    """(raw key, payload, raw signature) of up to 5,000 verified memories."""
    from palimpsest.identity import b64_nopad_decode

    return [
        (
            b64_nopad_decode(m.envelope.public_key, 32, "key"),
            m.payload,
            b64_nopad_decode(m.signature, 64, "sig"),
        )
        for m in memories[:5000]
    ]


def _queries(repo: pygit2.Repository, head: str, runs: int = 40) -> dict[str, dict[str, float]]:
    def ask(**flags: Any) -> Callable[[], Any]:
        return lambda: recall(repo, normalize_request(at_commit=head, **flags))

    first = recall(repo, normalize_request(at_commit=head))
    out: dict[str, dict[str, float]] = {}
    cases: dict[str, Callable[[], Any]] = {
        "default": ask(),
        "topic": ask(topic=["topic-07"]),
        "query_two_terms": ask(query="stream isolation"),
        "kind_decision_all_lifecycles": ask(kind=["decision"], lifecycle=["all"]),
        "include_untrusted": ask(include_untrusted=True),
        "page_2": ask(cursor=first.next_cursor) if first.next_cursor else ask(),
    }
    for name, fn in cases.items():
        fn()  # warm
        out[name] = {"matched": fn().matched, **_timed_cpu(fn, runs)}
    return out


def _greps(repo: pygit2.Repository, head: str, runs: int = 20) -> dict[str, Any]:
    from palimpsest.errors import InvalidInput

    def run(pattern: bytes, ignore_case: bool = False, **flags: Any) -> Callable[[], Any]:
        request = normalize_request(at_commit=head, **flags)
        return lambda: grep(repo, request, pattern, ignore_case=ignore_case)

    out: dict[str, Any] = {}
    cases = {
        "topic_filter_regex": run(rb"stream[-_ ]isolat\w*", topic=["topic-07"]),
        "topic_kind_ignore_case": run(
            b"DECISION|VERIFY", True, topic=["topic-11"], kind=["decision"]
        ),
        "unfiltered_literal": run(b"quarantine"),
    }
    for name, fn in cases.items():
        try:
            fn()
        except InvalidInput as exc:  # the work limit refuses unfiltered scans of big stores
            out[name] = {"refused": exc.code, **_timed_cpu(partial(_expect_refusal, fn), 10)}
            continue
        out[name] = {"matched": fn().matched, **_timed_cpu(fn, runs)}
    return out


def _expect_refusal(fn: Callable[[], Any]) -> None:
    from palimpsest.errors import InvalidInput

    try:
        fn()
    except InvalidInput:
        return


def _record_process(repo_path: Path, runs: int = 5) -> dict[str, float]:
    env = dict(os.environ)
    pal = [sys.executable, "-m", "palimpsest.cli.main"]
    argv = [*pal, "memory", "--repo", str(repo_path), "record", "--kind", "observation", "--at",
            "HEAD", "--applies", "descendants", "--topic", "bench"]  # fmt: skip
    times, bare = [], []
    for i in range(runs):
        start = time.perf_counter()
        subprocess.run([*argv, "--content", f"process run {i}"], check=True, env=env,
                       capture_output=True)  # fmt: skip
        times.append(time.perf_counter() - start)
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        bare.append(time.perf_counter() - start)
    return {
        "median_s": round(statistics.median(times), 4),
        "python_start_s": round(statistics.median(bare), 4),
    }


STORE_MARKER = "bench-store.json"  # written once a generated store is complete (``--keep``)


def _generate(count: int, path: Path) -> tuple[pygit2.Repository, str, Writer, dict[str, Any]]:
    """Generate a store of ``count`` memories at ``path``; return it and the generation stats."""
    rng = random.Random(count)
    repo, head = _init(path)
    writer = Writer(repo, head)
    measured = min(count, 1000)
    start = time.perf_counter()
    for _ in range(measured):
        writer.append(ACTORS[rng.randrange(len(ACTORS))], rng)
    append_rate = measured / (time.perf_counter() - start)
    writer.bulk = True
    start = time.perf_counter()
    for i in range(count - measured):
        writer.append(ACTORS[rng.randrange(len(ACTORS))], rng)
        if i % 5000 == 4999:
            writer.flush()
    writer.flush()
    writer.bulk = False
    stats = {
        "memories": count,
        "head": head,
        "append_per_s": round(append_rate, 1),
        "append_measured_over": measured,
        "bulk_generation_s": round(time.perf_counter() - start, 1),
    }
    return repo, head, writer, stats


def _store(count: int, workdir: Path) -> tuple[pygit2.Repository, str, Writer, dict[str, Any]]:
    """The store of ``count`` memories under ``workdir``: reused when a complete one is there
    (its append rate is the one measured when it was generated), generated otherwise."""
    path = workdir / f"store-{count}"
    marker = path / STORE_MARKER
    if marker.exists():
        stats = json.loads(marker.read_text())
        repo = store.open_repository(path)
        return repo, str(stats["head"]), Writer(repo, str(stats["head"])), {**stats, "reused": True}
    if path.exists():
        shutil.rmtree(path)  # an interrupted generation
    repo, head, writer, stats = _generate(count, path)
    marker.write_text(json.dumps(stats) + "\n")
    return repo, head, writer, stats


def _index_size(repo: pygit2.Repository) -> dict[str, Any]:
    from palimpsest.hn.index import INDEX_NAME, index_dir

    path = index_dir(repo) / INDEX_NAME
    size = path.stat().st_size
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = int(conn.execute("SELECT count(*) FROM rows").fetchone()[0])
    finally:
        conn.close()
    return {"bytes": size, "rows": rows, "bytes_per_row": round(size / max(rows, 1))}


def bench_queries(count: int, workdir: Path) -> dict[str, Any]:
    """Only the warm recall and grep queries over a (kept or new) store of ``count`` memories.

    The first open rebuilds the index when its format changed (timed as ``index_open_s``).
    """
    repo, head, _, stats = _store(count, workdir)
    context = IndexContext(head)
    start = time.perf_counter()
    open_index(repo, context).close()
    open_s = time.perf_counter() - start
    recall_ms = _queries(repo, head)
    grep_ms = _greps(repo, head)
    return {
        "load_average": [round(v, 2) for v in os.getloadavg()],
        "memories": count,
        "store": {k: v for k, v in stats.items() if k != "head"},
        "index_open_s": round(open_s, 3),
        "index_size": _index_size(repo),
        "recall_ms": recall_ms,
        "grep_ms": grep_ms,
    }


def bench_size(count: int, workdir: Path) -> dict[str, Any]:
    repo, head, writer, stats = _store(count, workdir)
    path = Path(repo.workdir)
    rng = random.Random(count + 1)

    start = time.perf_counter()
    memories = store.collect(repo)
    verify_rate = len(memories) / (time.perf_counter() - start)
    raw_rate = _raw_verify_rate(writer.payloads or _samples(memories))

    context = IndexContext(head)
    start = time.perf_counter()
    open_index(repo, context, rebuild=True).close()
    rebuild_s = time.perf_counter() - start
    open_index(repo, context).close()

    recall_ms = _queries(repo, head)
    base = open_index(repo, context)
    baseline = _ms(_timed(lambda: base.conn.execute("SELECT 1").fetchone(), 200))
    base.close()
    grep_ms = _greps(repo, head)
    size = _index_size(repo)

    updates = []
    for _ in range(5):
        writer.append(ACTORS[0], rng)
        start = time.perf_counter()
        open_index(repo, context).close()
        updates.append(time.perf_counter() - start)

    save_identity(Path(repo.path), ACTORS[0])
    record = _record_process(path)
    return {
        "load_average": [round(v, 2) for v in os.getloadavg()],
        "memories": count,
        "actors": len(ACTORS),
        **{k: v for k, v in stats.items() if k not in ("head", "memories")},
        "verify": {
            "memories_per_s": round(verify_rate, 1),
            "raw_ed25519_per_s": round(raw_rate, 1),
            "ratio": round(verify_rate / raw_rate, 3),
        },
        "index_rebuild_s": round(rebuild_s, 3),
        "index_size": size,
        "incremental_update_ms": round(statistics.median(updates) * 1000, 2),
        "recall_ms": recall_ms,
        "sqlite_select1_ms": baseline,
        "grep_ms": grep_ms,
        "record_process": record,
    }


def bench_upstream(workdir: Path) -> dict[str, Any] | None:
    bundle = SHARED / "interop" / "hn-memory-v0-scale" / "fixture.bundle"
    if not bundle.exists():
        return None
    path = workdir / "upstream-10k"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    subprocess.run(["git", "init", "-q", str(path)], check=True, env=env)
    git = ["git", "-C", str(path)]
    subprocess.run(
        [*git, "fetch", "-q", "--update-head-ok", str(bundle), "refs/*:refs/*"], check=True, env=env
    )
    subprocess.run([*git, "symbolic-ref", "HEAD", "refs/heads/main"], check=True, env=env)
    subprocess.run([*git, "reset", "-q", "--hard"], check=True, env=env)
    repo = store.open_repository(path)
    head = store.resolve_commit(repo, "HEAD")
    start = time.perf_counter()
    memories = store.collect(repo)
    verify_rate = len(memories) / (time.perf_counter() - start)
    raw_rate = _raw_verify_rate(_samples(memories))
    start = time.perf_counter()
    open_index(repo, IndexContext(head), rebuild=True).close()
    rebuild_s = time.perf_counter() - start
    return {
        "memories": len(memories),
        "verify": {
            "memories_per_s": round(verify_rate, 1),
            "raw_ed25519_per_s": round(raw_rate, 1),
            "ratio": round(verify_rate / raw_rate, 3),
        },
        "index_rebuild_s": round(rebuild_s, 3),
        "recall_ms": _queries(repo, head),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="1k and 10k only")
    parser.add_argument("--sizes", default="", help="comma-separated store sizes")
    parser.add_argument("--out", default="", help="also write the JSON document here")
    parser.add_argument("--no-upstream", action="store_true", help="skip the upstream 10k store")
    parser.add_argument(
        "--keep",
        default="",
        metavar="DIR",
        help="generate stores under DIR and keep them; a complete store already there is reused",
    )
    parser.add_argument(
        "--queries-only",
        action="store_true",
        help="only the warm recall/grep queries (and the index size) of each store",
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s] or (
        [1000, 10000] if args.quick else [1000, 10000, 100000]
    )
    keep = Path(args.keep).resolve() if args.keep else None
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
    workdir = keep or Path(tempfile.mkdtemp(prefix="pal-bench-"))
    os.environ.setdefault("GIT_CONFIG_NOSYSTEM", "1")
    results: dict[str, Any] = {
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "sizes": [],
    }
    try:
        for count in sizes:
            result = (bench_queries if args.queries_only else bench_size)(count, workdir)
            print(json.dumps(result), flush=True)
            results["sizes"].append(result)
            if keep is None:
                shutil.rmtree(workdir / f"store-{count}", ignore_errors=True)
        if not args.no_upstream and not args.queries_only:
            upstream = bench_upstream(workdir)
            print(json.dumps({"upstream_10k": upstream}), flush=True)
            results["upstream_10k"] = upstream
    finally:
        if keep is None:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            shutil.rmtree(workdir / "upstream-10k", ignore_errors=True)
    document = json.dumps(results, indent=2)
    print(document)
    if args.out:
        Path(args.out).write_text(document + "\n")


if __name__ == "__main__":
    main()
