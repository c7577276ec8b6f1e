"""kill -9 during writes: no acknowledged write is lost and no half-written one appears.

Several clients write numbered records concurrently; once enough writes were acknowledged the
server is killed with SIGKILL while requests are still in flight. After a restart on the same
data directory every acknowledged record is there, byte-identical to what was acknowledged,
every record that is there is whole (its content is exactly one of the sent payloads, version
1, with its stamped writer), and ``pal admin rebuild`` re-derives the same projections.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import httpx
from click.testing import CliRunner

from palimpsest.cli.main import cli
from tests.api.server import ok, provision, start
from tests.conftest import BOTH, Backend

WRITERS = 4
KILL_AFTER = 120  # acknowledged writes before the kill


BACKENDS = BOTH  # kill -9 mid-write on either store


def _payload(writer: int, n: int) -> dict[str, Any]:
    return {"type": "note", "title": f"w{writer}-n{n}",
            "content": [{"type": "text", "text": f"writer {writer} record {n} " + "x" * 200},
                        {"type": "text", "text": f"second part {writer}/{n}"}],
            "attributes": {"writer": writer, "n": n}}


def test_kill_9_during_writes_loses_no_acknowledged_write(backend: Backend) -> None:
    data_dir = backend.data_dir
    made = provision(data_dir, [("writer", "agent")], database=backend.database_url)
    server = start(data_dir, *backend.serve_args())
    token = made["owner"].token
    with server.client(token) as owner:
        mid = ok(owner.post("/v1/memories", json={"name": "Crash"}))["id"]
    acknowledged: dict[str, dict[str, Any]] = {}
    sent: dict[str, dict[str, Any]] = {}
    lock = threading.Lock()
    enough = threading.Event()

    def write(writer: int) -> None:
        with server.client(token) as client:
            for n in range(100_000):
                payload = _payload(writer, n)
                with lock:
                    sent[payload["title"]] = payload
                try:
                    response = client.post(f"/v1/memories/{mid}/records", json=payload,
                                           headers={"Idempotency-Key": payload["title"]})
                except httpx.HTTPError:
                    return  # the server died under this request
                if response.status_code != 200:
                    return
                with lock:
                    acknowledged[payload["title"]] = response.json()
                    if len(acknowledged) >= KILL_AFTER:
                        enough.set()

    threads = [threading.Thread(target=write, args=(w,)) for w in range(WRITERS)]
    for thread in threads:
        thread.start()
    assert enough.wait(timeout=240), server.stderr()
    server.kill9()
    for thread in threads:
        thread.join(timeout=60)
    assert len(acknowledged) >= KILL_AFTER

    restarted = start(data_dir, *backend.serve_args())
    try:
        with restarted.client(token) as owner:
            stored: dict[str, Any] = {}
            cursor = None
            while True:
                params: dict[str, Any] = {"limit": 200, "include": "all"}
                if cursor:
                    params["cursor"] = cursor
                page = ok(owner.get(f"/v1/memories/{mid}/records", params=params))
                for record in page["data"]:
                    stored[record["title"]] = record
                cursor = page.get("next")
                if not cursor:
                    break
            for title, record in acknowledged.items():
                assert stored.get(title) == record, title  # present and byte-identical
            for title, record in stored.items():
                payload = sent[title]  # never a record nobody sent
                assert record["content"] == payload["content"]
                assert record["attributes"] == payload["attributes"]
                assert record["version"] == 1 and record["status"] == "active"
                assert record["written_by"]["id"] == made["owner"].id
                history = ok(owner.get(f"/v1/memories/{mid}/records/{record['id']}/history"))
                assert len(history["data"]) == 1
            memory = ok(owner.get(f"/v1/memories/{mid}"))
            assert memory["records"]["count"] == len(stored)
    finally:
        restarted.stop()
    store = ["--database", backend.database_url] if backend.database_url else []
    result = CliRunner().invoke(cli, ["admin", "--data-dir", str(data_dir), *store, "rebuild",
                                      "--json"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["equal"] is True
