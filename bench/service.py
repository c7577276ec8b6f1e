"""Speed of the memory service over HTTP: remember throughput and recall p50/p99.

Usage: ``.venv/bin/python bench/service.py [--sizes 10000,100000] [--clients 8] [--repeats 3]
[--database postgresql://USER:PW@HOST:PORT/DB]``

With ``--database`` the store is PostgreSQL (``pal serve --database``): for each size a fresh
database is created beside the one named (the role needs CREATEDB) and dropped afterwards, and
the same-run baselines are PostgreSQL's own — the bare psycopg insert-and-commit rate (one row
of the same texts per transaction) and a bare ``tsvector`` query (the same texts in one table
under a GIN index, ``@@ plainto_tsquery('simple', …)`` ranked by ``ts_rank``, ``LIMIT 8``) — in
place of the SQLite storage figure.

For each size a fresh data directory is seeded in-process with the same bulk importer as
``bench/service_inprocess.py`` (changesets of 1,000 ``add_record`` ops through the service's own
write path, 50 memories under one root), then a real ``pal serve`` is started on it and driven
over loopback HTTP with keep-alive connections:

- ``recall`` at the root (51 memories in reach) and at one leaf, 2–3 word ``text`` queries drawn
  from stored records, ``limit`` 8, one client: p50 and p99 latency per request;
- ``remember`` throughput with ``--clients`` concurrent connections, and with one: each write
  its own ``Idempotency-Key`` and its own changeset (concurrent writes may share a
  transaction: group commit, ``service/grouped.py``). The load comes from
  ``bench/http_load.py`` in a separate process — pre-built requests on keep-alive sockets, so
  the client costs a few percent of what the server does (its CPU per write is reported);
  httpx clients in threads cost about as much CPU as the server and measured the client;
- same-run baselines: the HTTP floor (``GET /v1/uhp``, authentication and routing only) and,
  after the server stops, :meth:`MemoryService.remember` in-process on the same store;
- storage: bytes on disk per record for ``--storage-records`` records written one by one
  through :meth:`MemoryService.remember` (each with its own ``Idempotency-Key``, as HTTP
  writes carry one — a UUID as clients make them, and a short one: changeset, ref move, body,
  projection, index, stored response — not the bulk importer), beside the baseline in the
  same run: one SQLite table of the same texts with an FTS5 index over it holding its own copy
  (FTS5's default, as a person would build it); the external-content FTS5 variant (no second
  copy of the text) is reported too. All are measured after a WAL checkpoint, as the growth
  of the database file (page size 4096) over a store holding only the memory; the ratio to
  the table + FTS5 baseline is the target (≤ 3×).

Wall-clock rates depend on what else the machine runs, so the server's CPU time during the
remember phase is read from ``/proc`` too (server CPU per write, all its threads).

``--workers 1,2,4`` measures every HTTP figure against ``pal serve --workers N`` for each
count, on the same store in the same run (``by_workers``), adding root recall from
``--clients`` connections at once (``bench/http_load.py --recall``): throughput, p50/p99 under
that load, server CPU per recall and the cores the server got (supervisor and every worker:
on a shared machine, the ceiling of what more workers can give). ``recall_throughput_vs_first``
is each count's concurrent-recall throughput over the first count's (target: 2 workers ≥ 1.5×
one).

Prints one JSON document. Numbers go to docs/benchmarks.md. The 1M-record in-process recall is
``bench/service_inprocess.py`` (the service core's benchmark).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx

from palimpsest.service import MemoryService


def _inprocess() -> ModuleType:
    path = Path(__file__).with_name("service_inprocess.py")
    spec = importlib.util.spec_from_file_location("service_inprocess", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


INPROC = _inprocess()


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))]


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _serve(data_dir: Path, workers: int = 1, database: str | None = None
           ) -> tuple[subprocess.Popen[bytes], str, list[int]]:
    """``pal serve --workers N`` on ``data_dir`` (and ``database``): the process, its URL, and
    the processes whose CPU time is the server's (the supervisor and every worker)."""
    extra = ["--database", database] if database else []
    proc = subprocess.Popen(
        [sys.executable, "-m", "palimpsest.cli.main", "serve", "--data-dir", str(data_dir),
         "--port", "0", "--json", "--workers", str(workers), *extra], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        raise SystemExit("pal serve did not start")
    announce = json.loads(line)
    return proc, announce["url"], sorted({proc.pid, *announce["workers"]})


def _latencies(client: httpx.Client, method: str, path: str, bodies: list[Any]) -> list[float]:
    for body in bodies[:20]:  # warm connections and the page cache
        client.request(method, path, json=body)
    out = []
    for body in bodies:
        t0 = time.perf_counter()
        response = client.request(method, path, json=body)
        out.append((time.perf_counter() - t0) * 1000)
        if response.status_code != 200:
            raise SystemExit(f"{path}: {response.status_code} {response.text[:200]}")
    return out


def _summary(lat: list[float]) -> dict[str, Any]:
    return {"p50_ms": round(statistics.median(lat), 2), "p99_ms": round(pct(lat, 0.99), 2),
            "requests": len(lat)}


def _remember_rate(url: str, token: str, mid: str, *, clients: int, total: int,
                   seed: int) -> dict[str, float]:
    """Remembers per second from ``bench/http_load.py`` in its own process (keep-alive
    sockets, pre-built requests: a client that costs the server's cores little), with the
    client's own CPU time per write."""
    out = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("http_load.py")), url, token, mid,
         "--clients", str(clients), "--writes", str(total), "--seed", str(seed)],
        check=True, capture_output=True, text=True)
    result = json.loads(out.stdout)
    return {"per_s": result["writes"] / result["seconds"], "writes": result["writes"],
            "client_cpu_ms": result["client_cpu_s"] * 1000 / result["writes"]}


def _time_keyed(svc: MemoryService, caller: Any, mid: str, rng: random.Random,
                n: int) -> tuple[float, float]:
    """In-process remembers with an idempotency key each: per wall second, per CPU second."""
    texts = [" ".join(INPROC.words(rng, 20)) for _ in range(n)]
    t0, c0 = time.perf_counter(), time.thread_time()
    for i, text in enumerate(texts):
        svc.remember(caller, mid, {"content": text}, idempotency_key=f"inproc-{i}")
    return n / (time.perf_counter() - t0), n / (time.thread_time() - c0)


def _file_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _checkpointed(db_path: Path) -> int:
    db = sqlite3.connect(db_path)
    try:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        db.close()
    return _file_bytes(db_path.parent)


def storage_per_record(n: int, seed: int = 7) -> dict[str, Any]:
    """Bytes per record through ``remember`` (keys as clients send them: UUIDs, and short
    ones) beside a bare SQLite table of the same texts with an FTS5 index, in the same run."""
    rng = random.Random(seed)
    texts = [" ".join(INPROC.words(rng, 20)) for _ in range(n)]
    ours = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, key in (("uuid_keys", lambda i: str(uuid.UUID(int=rng.getrandbits(128),
                                                                 version=4))),
                          ("short_keys", lambda i: f"store-{i}")):
            ours[name] = _remembered_bytes(Path(tmp) / name, texts, key)
        bare = {name: _bare_bytes(Path(tmp) / name, texts, content)
                for name, content in (("external", True), ("copy", False))}
    base = bare["copy"]
    return {"records": n, "text_bytes_mean": round(sum(len(x) for x in texts) / n),
            "bytes_per_record_remember": round(ours["uuid_keys"]),
            "bytes_per_record_remember_short_keys": round(ours["short_keys"]),
            # the baseline: a table of the texts and an FTS5 index over them with its own copy
            # of the text (FTS5's default), as a person would build it
            "bytes_per_record_table_plus_fts5": round(base),
            "ratio": round(ours["uuid_keys"] / base, 2),
            "ratio_short_keys": round(ours["short_keys"] / base, 2),
            # stronger still: the FTS5 index reads the table (external content), no second copy
            "bytes_per_record_table_plus_external_fts5": round(bare["external"]),
            "ratio_to_external_fts5": round(ours["uuid_keys"] / bare["external"], 2),
            "target_ratio": 3}


def _remembered_bytes(folder: Path, texts: list[str], key: Any) -> float:
    """Growth of a checkpointed store per record written one by one through remember."""
    data_dir = folder / "data"
    with MemoryService(data_dir) as svc:
        made = svc.bootstrap_owner()
        assert made is not None
        caller = svc.caller(made[0].id)
        mid = svc.create_memory(caller, {"name": "storage"})["id"]
    empty = _checkpointed(data_dir / "palimpsest.db")
    with MemoryService(data_dir) as svc:
        caller = svc.caller(made[0].id)
        for i, text in enumerate(texts):
            svc.remember(caller, mid, {"content": text}, idempotency_key=key(i))
    return (_checkpointed(data_dir / "palimpsest.db") - empty) / len(texts)


def _bare_bytes(folder: Path, texts: list[str], external: bool) -> float:
    """Bytes per text of one SQLite table of the texts with an FTS5 index, one transaction per
    text as remember commits each (``external``: FTS5 reads the table, no second copy)."""
    folder.mkdir()
    path = folder / "bare.db"
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, text TEXT NOT NULL)")
    options = ", content='t', content_rowid='id'" if external else ""
    db.execute(f"CREATE VIRTUAL TABLE f USING fts5(text{options})")
    db.commit()
    db.close()
    empty = _checkpointed(path)
    db = sqlite3.connect(path)
    for text in texts:
        with db:
            rowid = db.execute("INSERT INTO t (text) VALUES (?)", (text,)).lastrowid
            db.execute("INSERT INTO f (rowid, text) VALUES (?, ?)", (rowid, text))
    db.close()
    return (_checkpointed(path) - empty) / len(texts)


def _median(runs: list[dict[str, float]], key: str, digits: int) -> float | int:
    middle = statistics.median(r[key] for r in runs)
    return round(middle, digits) if digits else round(middle)


def _recall_rate(url: str, token: str, mid: str, queries: Path, *, clients: int,
                 total: int) -> dict[str, float]:
    """Recalls per second over ``clients`` keep-alive connections (``bench/http_load.py
    --recall``), with the latency of each request under that load."""
    out = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("http_load.py")), url, token, mid,
         "--clients", str(clients), "--writes", str(total), "--recall", str(queries)],
        check=True, capture_output=True, text=True)
    result = json.loads(out.stdout)
    return {"per_s": result["writes"] / result["seconds"], "requests": result["writes"],
            "p50_ms": result["p50_ms"], "p99_ms": result["p99_ms"]}


def _server_cpu(pids: list[int]) -> float:
    return sum(_cpu_seconds(p) for p in pids)


def _phase(data_dir: Path, token: str, workers: int, root: str, leaves: list[str],  # noqa: PLR0917
           qs: list[str], *, clients: int, n_writes: int, repeats: int,
           database: str | None = None) -> dict[str, Any]:
    """Everything measured over HTTP against one ``pal serve --workers N``."""
    proc, url, pids = _serve(data_dir, workers, database)
    queries = data_dir.parent / "queries.json"
    queries.write_text(json.dumps(qs))
    try:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"},
                          timeout=60) as client:
            floor = _latencies(client, "GET", "/v1/uhp", [None] * len(qs))
            bodies = [{"text": q, "limit": 8} for q in qs]
            cpu0 = _server_cpu(pids)
            root_lat = _latencies(client, "POST", f"/v1/memories/{root}/recall", bodies)
            cpu1 = _server_cpu(pids)
            leaf_lat = _latencies(client, "POST", f"/v1/memories/{leaves[0]}/recall", bodies)
            cpu2 = _server_cpu(pids)
        # Mean server CPU per recall (the 20 warm-up requests of each phase included).
        root_cpu = (cpu1 - cpu0) * 1000 / (len(bodies) + 20)
        leaf_cpu = (cpu2 - cpu1) * 1000 / (len(bodies) + 20)
        _remember_rate(url, token, leaves[2], clients=2, total=100, seed=0)  # warm up
        _recall_rate(url, token, root, queries, clients=clients, total=clients * 10)
        runs: dict[int, list[dict[str, float]]] = {clients: [], 1: []}
        recalls: list[dict[str, float]] = []
        for rep in range(repeats):  # interleaved, so a burst of other load hits every kind
            cpu0 = _server_cpu(pids)
            one = _recall_rate(url, token, root, queries, clients=clients,
                               total=max(len(qs), clients * 20))
            used = _server_cpu(pids) - cpu0
            one["server_cpu_ms"] = used * 1000 / one["requests"]
            # cores the server got: on a shared machine the ceiling of its throughput
            one["server_cores"] = used * one["per_s"] / one["requests"]
            recalls.append(one)
            for n_clients, total in ((clients, n_writes), (1, n_writes // 2)):
                cpu0 = _server_cpu(pids)
                one = _remember_rate(url, token, leaves[1 if n_clients > 1 else 2],
                                     clients=n_clients, total=total, seed=1 + rep)
                one["server_cpu_ms"] = (_server_cpu(pids) - cpu0) * 1000 / one["writes"]
                runs[n_clients].append(one)
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    return {
        "workers": workers,
        "http_floor_get_uhp": _summary(floor),
        "recall_root_http": {**_summary(root_lat), "server_cpu_ms_mean": round(root_cpu, 2)},
        "recall_leaf_http": {**_summary(leaf_lat), "server_cpu_ms_mean": round(leaf_cpu, 2)},
        # root recalls from --clients connections at once: throughput and latency under load
        "recall_root_http_concurrent": {
            "clients": clients, "per_s": _median(recalls, "per_s", 0),
            "p50_ms": _median(recalls, "p50_ms", 2), "p99_ms": _median(recalls, "p99_ms", 2),
            "server_cpu_ms": _median(recalls, "server_cpu_ms", 3),
            "server_cores": _median(recalls, "server_cores", 2),
            "runs": [round(r["per_s"]) for r in recalls]},
        # Medians over --repeats runs (every run listed after). Server CPU per write: parsing,
        # auth, validation, the facade, SQLite, all threads of every worker — independent of
        # other load; the load generator's own CPU per write beside it.
        "remember_http_per_s": _median(runs[clients], "per_s", 0),
        "remember_http_clients": clients,
        "remember_http_server_cpu_ms": _median(runs[clients], "server_cpu_ms", 3),
        "remember_http_client_cpu_ms": _median(runs[clients], "client_cpu_ms", 3),
        "remember_http_single_client_per_s": _median(runs[1], "per_s", 0),
        "remember_http_single_client_server_cpu_ms": _median(runs[1], "server_cpu_ms", 3),
        "remember_http_runs": {str(k): [{"per_s": round(r["per_s"]),
                                         "server_cpu_ms": round(r["server_cpu_ms"], 3)}
                                        for r in v] for k, v in runs.items()},
        "load_average_1m": round(os.getloadavg()[0], 2),
    }


def run(size: int, n_queries: int, n_writes: int, clients: int,  # noqa: PLR0917
        repeats: int, workers: list[int], database: str | None = None) -> dict[str, Any]:
    rng = random.Random(size)
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp) / "data"
        svc = MemoryService(data_dir, database=database)
        made = svc.bootstrap_owner()
        assert made is not None
        owner, token = made
        caller = svc.caller(owner.id)
        t0 = time.perf_counter()
        root, leaves, samples = INPROC.seed(svc, caller, size, rng)
        seeded = time.perf_counter() - t0
        svc.close()
        qs = INPROC.queries(rng, samples or ["w1 w2"], n_queries)
        phases = [_phase(data_dir, token, n, root, leaves, qs, clients=clients,
                         n_writes=n_writes, repeats=repeats, database=database)
                  for n in workers]
        with MemoryService(data_dir, database=database) as again:
            inproc_wall, inproc_cpu = INPROC.time_remember(again, again.caller(owner.id),
                                                           leaves[3], rng, n_writes)
            keyed_wall, keyed_cpu = _time_keyed(again, again.caller(owner.id), leaves[4], rng,
                                                n_writes)
    first = phases[0]
    base = first["recall_root_http_concurrent"]["per_s"]
    return {
        "records": size, "memories": INPROC.MEMORIES + 1,
        "seed_records_per_s": round(size / seeded),
        **{k: v for k, v in first.items() if k not in ("workers", "load_average_1m")},
        # pal serve --workers N, every count on the same store in the same run; the first
        # count's figures are also the ones above
        "by_workers": phases,
        "recall_throughput_vs_first": {str(p["workers"]): round(
            p["recall_root_http_concurrent"]["per_s"] / base, 2) if base else None
            for p in phases},
        "baseline_remember_inprocess_per_s": round(inproc_wall),
        "baseline_remember_inprocess_per_cpu_s": round(inproc_cpu),
        # the same with an Idempotency-Key per write, as every HTTP write here carries
        "baseline_remember_inprocess_keyed_per_s": round(keyed_wall),
        "baseline_remember_inprocess_keyed_cpu_ms": round(1000 / keyed_cpu, 3),
        "store": "postgresql" if database else "sqlite",
        **(_pg_baselines(database, size, qs, n_writes) if database else {}),
        "load_average_1m": round(os.getloadavg()[0], 2), "cpus": os.cpu_count(),
    }


def _pg_baselines(url: str, size: int, qs: list[str], n_writes: int) -> dict[str, Any]:
    """PostgreSQL's floor on the same server, same run: one row of text per committed
    transaction through psycopg, and a bare tsvector query over ``size`` texts."""
    import psycopg

    rng = random.Random(size + 1)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE bare_rows (id bigserial PRIMARY KEY, text text NOT NULL)")
        texts = [" ".join(INPROC.words(rng, rng.randint(12, 30))) for _ in range(n_writes)]
        t0 = time.perf_counter()
        for text in texts:
            with conn.transaction():
                conn.execute("INSERT INTO bare_rows (text) VALUES (%s)", (text,))
        commit_rate = n_writes / (time.perf_counter() - t0)
        conn.execute("CREATE TABLE bare_fts (id bigserial PRIMARY KEY, text text NOT NULL, "
                     "tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', text)) STORED)")
        with conn.cursor().copy("COPY bare_fts (text) FROM STDIN") as copy:
            for _ in range(size):
                copy.write_row((" ".join(INPROC.words(rng, rng.randint(12, 30))),))
        conn.execute("CREATE INDEX bare_fts_tsv ON bare_fts USING gin (tsv)")
        conn.execute("ANALYZE bare_fts")
        sql = ("SELECT id FROM bare_fts, plainto_tsquery('simple', %s) q WHERE tsv @@ q "
               "ORDER BY ts_rank(tsv, q) DESC LIMIT 8")
        for q in qs[:20]:
            conn.execute(sql, (q,)).fetchall()
        lat = []
        for q in qs:
            t0 = time.perf_counter()
            conn.execute(sql, (q,)).fetchall()
            lat.append((time.perf_counter() - t0) * 1000)
        # the same query shape recall's candidates take: any term (OR), not all of them
        any_sql = ("SELECT id FROM bare_fts, to_tsquery('simple', %s) q WHERE tsv @@ q "
                   "ORDER BY ts_rank(tsv, q) DESC LIMIT 8")
        any_lat = []
        for q in qs:
            t0 = time.perf_counter()
            conn.execute(any_sql, (" | ".join(q.split()),)).fetchall()
            any_lat.append((time.perf_counter() - t0) * 1000)
    return {"baseline_psycopg_insert_commit_per_s": round(commit_rate),
            "baseline_tsvector_all_terms": _summary(lat),
            "baseline_tsvector_any_term": _summary(any_lat)}


def _database_for(url: str, size: int) -> Any:
    """A fresh database beside ``url``'s, for one size (dropped by the caller)."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    name = f"pal_bench_{size}_{os.getpid()}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    info = conninfo_to_dict(url)
    made = make_conninfo(**{**info, "dbname": name})
    host, port = info.get("host", "localhost"), info.get("port", 5432)
    user, password = info.get("user", ""), info.get("password", "")
    return name, made, f"postgresql://{user}:{password}@{host}:{port}/{name}"


def _drop(url: str, name: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def run_database(size: int, args: argparse.Namespace) -> dict[str, Any]:
    """:func:`run` on a fresh PostgreSQL database of its own."""
    name, _, url = _database_for(args.database, size)
    try:
        return run(size, args.queries, args.writes, args.clients, args.repeats,
                   [int(w) for w in args.workers.split(",")], url)
    finally:
        _drop(args.database, name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--writes", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3,
                        help="remember and concurrent recall runs (median kept)")
    parser.add_argument("--workers", default="1",
                        help="pal serve --workers counts to measure, e.g. 1,2,4 (same store)")
    parser.add_argument("--storage-records", type=int, default=5000,
                        help="records written through remember for the storage figure")
    parser.add_argument("--storage-only", action="store_true",
                        help="measure only bytes per record (no server)")
    parser.add_argument("--database", default=None,
                        help="postgresql:// URL: run on PostgreSQL (a fresh database per size "
                        "is created beside this one)")
    args = parser.parse_args()
    storage = None if args.database else storage_per_record(args.storage_records)
    results = [] if args.storage_only else [
        run_database(int(s), args) if args.database else
        run(int(s), args.queries, args.writes, args.clients, args.repeats,
            [int(w) for w in args.workers.split(",")])
        for s in args.sizes.split(",")]
    print(json.dumps({"benchmark": "service_http", "target_remember_http_per_s": 500,
                      "target_recall_throughput_2_workers_vs_1": 1.5,
                      "storage": storage, "results": results,
                      "load_average_1m": round(os.getloadavg()[0], 2)}, indent=2))


if __name__ == "__main__":
    main()
