"""Limits per credential over real HTTP (``pal serve``): 16 concurrent clients on one credential
are held to its rate and concurrency (429 with ``Retry-After``, the limit named), every
acknowledged write is stored and no refused one is, another credential is never limited by
them; bytes written per minute; over MCP a tool error names the limit. (Another credential's
recall latency under the same flood, against the same recall alone, is ``bench/limits.py``.)"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp.client.streamable_http import streamable_http_client

from mcp import Client
from tests.api.server import Server, ok, provision, start

RATE, BURST, CONCURRENT, WRITE_BYTES = 20.0, 5, 4, 20_000
CLIENTS = 16


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    data_dir: Path = tmp_path_factory.mktemp("limits") / "data"
    members = provision(data_dir, (("flood", "agent"), ("calm", "agent"), ("big", "agent"),
                                   ("tool", "agent")))
    server = start(data_dir, "--requests-per-second", str(RATE), "--rate-burst", str(BURST),
                   "--concurrent-requests", str(CONCURRENT),
                   "--write-bytes-per-minute", str(WRITE_BYTES))
    try:
        with server.client(members["owner"].token) as owner:
            memory = ok(owner.post("/v1/memories", json={"name": "Limited"}))["id"]
            for name in ("flood", "calm", "big", "tool"):
                ok(owner.post(f"/v1/memories/{memory}/grants", json={
                    "principal": f"member:{members[name].id}",
                    "privileges": ["read", "write"]}))
        yield {"server": server, "members": members, "memory": memory}
    finally:
        server.stop()


def _flood(server: Server, token: str, memory: str, seconds: float) -> dict[str, Any]:
    stop = time.monotonic() + seconds
    lock = threading.Lock()
    seen: dict[str, Any] = {"ok": [], "refused": [], "other": []}

    def run(n: int) -> None:
        with server.client(token) as client:
            i = 0
            while time.monotonic() < stop:
                i += 1
                answer = client.post(f"/v1/memories/{memory}/records",
                                     json={"content": f"flood {n}-{i}"})
                with lock:
                    if answer.status_code == 200:
                        seen["ok"].append(answer.json()["id"])
                    elif answer.status_code == 429:
                        seen["refused"].append((answer.headers.get("retry-after"),
                                                answer.json()["error"]))
                    else:
                        seen["other"].append((answer.status_code, answer.text))

    threads = [threading.Thread(target=run, args=(n,)) for n in range(CLIENTS)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seen["elapsed"] = time.monotonic() - started
    return seen


def test_sixteen_clients_on_one_credential_are_held_to_its_limits(world: dict[str, Any]) -> None:
    server, members, memory = world["server"], world["members"], world["memory"]
    calm_answers: list[int] = []
    done = threading.Event()

    def calm() -> None:  # another credential, reading all along
        with server.client(members["calm"].token) as client:
            while not done.is_set():
                calm_answers.append(client.post(f"/v1/memories/{memory}/recall",
                                                json={"query": "flood"}).status_code)
                time.sleep(0.05)

    reader = threading.Thread(target=calm)
    reader.start()
    try:
        seen = _flood(server, members["flood"].token, memory, seconds=3.0)
    finally:
        done.set()
        reader.join()
    assert seen["other"] == []
    accepted, refused = seen["ok"], seen["refused"]
    # the token bucket: a burst, then the rate (one token of slack for the clock's edges)
    assert 0 < len(accepted) <= BURST + RATE * seen["elapsed"] + 1
    assert len(refused) > len(accepted)  # 16 clients asked for far more
    limits = {error["detail"]["limit"] for _, error in refused}
    assert limits <= {"requests_per_second", "concurrent_requests"} and limits
    for retry_after, error in refused:
        assert error["code"] == "x.pal.rate_limited" and error["type"] == "rate_limit_error"
        assert retry_after is not None and int(retry_after) >= 1
        assert int(retry_after) == error["detail"]["retry_after_seconds"]
        assert error["detail"]["limit"] in error["message"]
    # the other credential was never limited by the flood
    assert calm_answers and set(calm_answers) == {200}
    # every acknowledged write is stored; nothing refused was
    time.sleep(1.0)  # let the bucket refill for the read below
    with server.client(members["owner"].token) as owner:
        listed = ok(owner.get(f"/v1/memories/{memory}/records", params={"limit": 200}))
    mine = {r["id"] for r in listed["data"] if r["written_by"]["id"] == members["flood"].id}
    assert mine == set(accepted)


def test_bytes_written_per_minute(world: dict[str, Any]) -> None:
    server, members, memory = world["server"], world["members"], world["memory"]
    body = {"content": "x" * 7000}
    with server.client(members["big"].token) as big:
        ok(big.post(f"/v1/memories/{memory}/records", json=body))
        ok(big.post(f"/v1/memories/{memory}/records", json=body))
        over = big.post(f"/v1/memories/{memory}/records", json=body)
        assert over.status_code == 429
        assert over.json()["error"]["detail"]["limit"] == "write_bytes_per_minute"
        assert 1 <= int(over.headers["retry-after"]) <= 60
        ok(big.post(f"/v1/memories/{memory}/recall", json={"query": "x"}))  # reads still pass
    with server.client(members["owner"].token) as owner:
        listed = ok(owner.get(f"/v1/memories/{memory}/records", params={"limit": 200}))
    assert sum(r["written_by"]["id"] == members["big"].id for r in listed["data"]) == 2


def test_mcp_tool_error_names_the_limit(world: dict[str, Any]) -> None:
    server, members, memory = world["server"], world["members"], world["memory"]
    texts: list[str] = []

    async def run() -> None:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {members['tool'].token}"},
                                  timeout=60)
        async with Client(streamable_http_client(f"{server.url}/mcp", http_client=http)) as c:
            async def one() -> None:
                result = await c.call_tool("memory_recall", {"memory": memory, "text": "x"})
                if result.is_error:
                    texts.append(result.content[0].text)  # type: ignore[union-attr]

            async with anyio.create_task_group() as group:  # at once: over burst and in flight
                for _ in range(BURST + 15):
                    group.start_soon(one)

    anyio.run(run)
    assert texts, "no call was limited"
    assert all("x.pal.rate_limited" in t for t in texts)
    assert all("requests_per_second" in t or "concurrent_requests" in t for t in texts)
    assert httpx.get(f"{server.url}/healthz").status_code == 200
