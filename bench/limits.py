"""Does one flooding credential slow another's recall? (issue 19, limits per credential)

Usage: ``.venv/bin/python bench/limits.py [--records 2000] [--seconds 8] [--clients 16]``

A real ``pal serve`` on a fresh data directory (``--records`` records in one memory, written
in-process before it starts) with its **default** limits (16 requests in flight per
credential, no rate limit). Credential *calm* recalls in a loop, one request at a time with a
short pause, first alone (the baseline) and then while ``--clients`` threads of credential
*flood* (in a process of their own) send ``remember`` and ``recall`` as fast as their answers
come, ignoring ``Retry-After``. Both phases run one after the other on the same server.

Prints one JSON document: calm's recall p50/p95 alone and under the flood, their ratios (the
issue's target: within 2× of the unloaded value), what the flood got (answers, 429s by limit),
and the machine's load average (the machine is shared: read the ratio, not the milliseconds).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

from palimpsest.service import MemoryService


def _serve(data_dir: Path, *extra: str) -> tuple[subprocess.Popen[bytes], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "palimpsest.cli.main", "serve", "--data-dir", str(data_dir),
         "--host", "127.0.0.1", "--port", "0", "--json", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    return proc, json.loads(proc.stdout.readline())["url"]


def _seed(data_dir: Path, records: int) -> tuple[str, str, str]:
    with MemoryService(data_dir) as svc:
        made = svc.bootstrap_owner()
        assert made is not None
        owner = svc.authenticate(made[1])
        memory = svc.create_memory(owner, {"name": "bench"})["id"]
        tokens = []
        for name in ("calm", "flood"):
            member = svc.create_member(name, "agent")
            svc.put_grant(owner, memory, {"principal": f"member:{member.id}",
                                          "privileges": ["read", "write"]})
            tokens.append(svc.issue_credential(member.id, name)[1])
        words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]
        for i in range(records):
            svc.remember(owner, memory, {"content": f"note {i} {words[i % 8]} {words[i % 5]} "
                                                    f"about the release plan {i % 97}"})
    return memory, tokens[0], tokens[1]


def _calm(url: str, token: str, memory: str, seconds: float) -> list[float]:
    out = []
    stop = time.monotonic() + seconds
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}) as client:
        while time.monotonic() < stop:
            began = time.perf_counter()
            answer = client.post(f"/v1/memories/{memory}/recall",
                                 json={"text": "release plan delta", "limit": 8})
            out.append((time.perf_counter() - began) * 1000)
            assert answer.status_code == 200, answer.text
            time.sleep(0.02)
    return out


def _flood(url: str, token: str, memory: str, clients: int, seconds: float) -> dict[str, int]:
    """``clients`` threads of one credential, as fast as answers come (run in its own process
    so its threads do not share this process's interpreter lock with the calm client)."""
    counts: dict[str, int] = {}
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def run(n: int) -> None:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}) as c:
            i = 0
            while time.monotonic() < stop:
                i += 1
                if i % 2:
                    r = c.post(f"/v1/memories/{memory}/records", json={"content": f"f {n} {i}"})
                else:
                    r = c.post(f"/v1/memories/{memory}/recall", json={"text": "alpha plan"})
                key = str(r.status_code)
                if r.status_code == 429:
                    key += ":" + r.json()["error"]["detail"]["limit"]
                with lock:
                    counts[key] = counts.get(key, 0) + 1

    threads = [threading.Thread(target=run, args=(n,)) for n in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return counts


def _summary(ms: list[float]) -> dict[str, float]:
    ordered = sorted(ms)
    return {"n": len(ms), "p50_ms": round(statistics.median(ordered), 2),
            "p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))], 2)}


def main() -> None:
    if sys.argv[1:2] == ["--flood"]:
        url, token, memory, clients, seconds = sys.argv[2:7]
        print(json.dumps(_flood(url, token, memory, int(clients), float(seconds))))
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--clients", type=int, default=16)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp) / "data"
        memory, calm_token, flood_token = _seed(data_dir, args.records)
        proc, url = _serve(data_dir)
        try:
            _calm(url, calm_token, memory, 1.0)  # warm up
            alone = _calm(url, calm_token, memory, args.seconds)
            flood = subprocess.Popen(
                [sys.executable, __file__, "--flood", url, flood_token, memory,
                 str(args.clients), str(args.seconds + 1.5)], stdout=subprocess.PIPE)
            time.sleep(1.0)
            loaded = _calm(url, calm_token, memory, args.seconds)
            out, _ = flood.communicate(timeout=120)
            counts = json.loads(out)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    a, b = _summary(alone), _summary(loaded)
    print(json.dumps({
        "bench": "limits", "records": args.records, "flood_clients": args.clients,
        "calm_recall_alone": a, "calm_recall_under_flood": b,
        "p50_ratio": round(b["p50_ms"] / a["p50_ms"], 2),
        "p95_ratio": round(b["p95_ms"] / a["p95_ms"], 2), "target_ratio": 2.0,
        "flood_answers": counts, "loadavg": os.getloadavg(),
    }, indent=2))


if __name__ == "__main__":
    main()
