"""``pal serve --workers 4``: four real processes over one store and one listening socket.

Every client connection is pinned to a known worker (``/metrics`` names the worker that
answers, and a keep-alive connection stays with the worker that accepted it), so each
property below is shown across processes, not just across threads of one:

- 16 concurrent writers on each of the 4 workers: every acknowledged write is readable once
  and only once, an idempotency key sent to two workers at once makes one record, and the
  memory's history is one chain (no forked ref);
- one merge authorization sent to every worker at once advances the protected ref once, and
  every other worker refuses the used nonce;
- a credential revoked by ``pal admin`` (another process again) is refused by every worker on
  its very next request;
- ``kill -9`` of one worker in the middle of writes loses no acknowledged write, the other
  workers keep answering, and the supervisor starts a new worker;
- a writer held up by another process's writer past ``--write-wait`` gets 503 with
  ``Retry-After`` on every worker, and its retry writes once.

Every test runs on both stores (SQLite WAL and PostgreSQL), through the same fixture.
"""

from __future__ import annotations

import json
import os
import re
import signal
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from palimpsest.cli.main import cli
from palimpsest.service.memories import MemoryService
from palimpsest.service.model import SHARED_MAIN
from palimpsest.service.storage import open_store
from tests.api.server import Server, err, ok, provision, start
from tests.conftest import BOTH, Backend
from tests.otherwriter import other_writer

BACKENDS = BOTH

WORKERS = 4
PER_WORKER = 16  # concurrent writers on each worker
WRITES = 5  # writes per writer
WAIT = 1.5  # --write-wait of the shared server (a writer then gets 503 and sends it again)
_WORKER = re.compile(r'^palimpsest_worker_info\{worker="(\d+)"\} 1\.0$', re.MULTILINE)
MERGE_KEY = "m" * 40
ENV = {"PAL_MERGE_HMAC_KEYS": f"k={MERGE_KEY}"}
# made once: an httpx client makes its own TLS context otherwise (~0.1 s each on a loaded
# machine), and pinning opens a few hundred clients
_TLS = ssl.create_default_context()


def connect(server: Server, token: str) -> httpx.Client:
    """A keep-alive client bearing ``token``: one connection, to whichever worker accepts it."""
    return httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {token}"},
                        timeout=30.0, verify=_TLS)


def worker_of(client: httpx.Client) -> int:
    """The worker that answers on this client's (kept-alive) connection."""
    found = _WORKER.search(client.get("/metrics").text)
    assert found is not None, "the server does not name its worker"
    return int(found.group(1))


def pinned(server: Server, token: str, per_worker: int) -> dict[int, list[httpx.Client]]:
    """``per_worker`` clients on each worker's own connection (clients beyond are closed)."""
    return pinned_to(server, token, WORKERS, per_worker)


def pinned_to(server: Server, token: str, workers: int,
              per_worker: int) -> dict[int, list[httpx.Client]]:
    """``per_worker`` clients on each of ``workers`` workers."""
    out: dict[int, list[httpx.Client]] = {w: [] for w in range(workers)}
    for _ in range(workers * per_worker * 20):
        if all(len(c) == per_worker for c in out.values()):
            return out
        client = connect(server, token)
        found = out[worker_of(client)]
        if len(found) < per_worker:
            found.append(client)
        else:
            client.close()
    raise AssertionError(f"connections did not reach every worker: "
                         f"{ {w: len(c) for w, c in out.items()} }")


def close_all(clients: dict[int, list[httpx.Client]]) -> None:
    for group in clients.values():
        for client in group:
            client.close()


def admin(backend: Backend, *args: str) -> Any:
    """``pal admin`` in the test process: not one of the server's processes."""
    store = ["--database", backend.database_url] if backend.database_url else []
    result = CliRunner().invoke(cli, ["admin", "--data-dir", str(backend.data_dir), *store,
                                      *args, "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def post_until_answered(client: httpx.Client, url: str, body: Any, key: str) -> httpx.Response:
    """POST with an idempotency key, sent again (same key) after a busy 503: a client's part."""
    for _ in range(20):
        response = client.post(url, json=body, headers={"Idempotency-Key": key})
        if response.status_code != 503:
            return response
        assert response.headers.get("retry-after"), response.text
        assert "locked" not in response.text, response.text
        time.sleep(0.05)
    return response


def every_record(client: httpx.Client, mid: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 200}
        if cursor:
            params["cursor"] = cursor
        page = ok(client.get(f"/v1/memories/{mid}/records", params=params))
        out.extend(page["data"])
        cursor = page.get("next")
        if not cursor:
            return out


def one_chain(backend: Backend, mid: str) -> int:
    """Walk the memory's history in the store: every changeset has at most one parent and no
    two share one, and the head of refs/shared/main reaches all of them. Returns its length."""
    store = open_store(backend.data_dir, database=backend.database_url)
    try:
        with store.read():
            changesets = list(store.changesets(mid))
            head = store.ref(mid, SHARED_MAIN)
    finally:
        store.close()
    assert head is not None and head.head is not None
    children: dict[str, str] = {}
    for cs in changesets:
        assert len(cs.parent_ids) <= 1, cs.id
        for parent in cs.parent_ids:
            assert parent not in children, f"forked: {parent} has two children"
            children[parent] = cs.id
    parents = {cs.id: cs.parent_ids[0] if cs.parent_ids else None for cs in changesets}
    walked, at = 0, head.head
    while at is not None:
        walked += 1
        at = parents[at]
    assert walked == len(changesets)
    return walked


@pytest.fixture(scope="module")
def world(module_backend: Backend) -> Iterator[dict[str, Any]]:
    backend = module_backend
    made = provision(backend.data_dir, [("alice", "human"), ("bob", "agent"), ("bot", "agent")],
                     database=backend.database_url)
    # a short write wait: the busy test below waits it out once per worker
    server = start(backend.data_dir, "--workers", str(WORKERS), "--write-wait", str(WAIT),
                   *backend.serve_args(), env=ENV)
    try:
        assert len(server.announce["workers"]) == WORKERS
        yield {"server": server, "backend": backend, **made}
    finally:
        assert server.stop() == 0, server.stderr()


def test_sixteen_writers_on_each_of_four_workers(world: dict[str, Any]) -> None:
    server, token = world["server"], world["owner"].token
    with server.client(token) as owner:
        mid = ok(owner.post("/v1/memories", json={"name": "Shared"}))["id"]
    clients = pinned(server, token, PER_WORKER)
    url = f"/v1/memories/{mid}/records"
    acknowledged: dict[str, dict[str, Any]] = {}
    twins: dict[str, list[str]] = {}  # a key sent to two workers at once -> record ids
    failures: list[str] = []
    lock = threading.Lock()
    start_line = threading.Barrier(WORKERS * PER_WORKER)

    def write(worker: int, slot: int, client: httpx.Client) -> None:
        start_line.wait()
        for n in range(WRITES):
            if n == 0:  # the same key and body on worker w and worker w+1, at the same moment
                key = f"twin-{(worker - (worker % 2))}-{slot}"
                body = {"type": "note", "content": f"twin {key}"}
            else:
                key = f"w{worker}-s{slot}-n{n}"
                body = {"type": "note", "content": f"writer {worker}/{slot} write {n}",
                        "attributes": {"key": key}}
            response = post_until_answered(client, url, body, key)
            with lock:
                if response.status_code != 200:
                    failures.append(f"{key}: {response.status_code} {response.text}")
                elif key.startswith("twin-"):
                    twins.setdefault(key, []).append(response.json()["id"])
                else:
                    acknowledged[key] = response.json()

    threads = [threading.Thread(target=write, args=(w, s, c))
               for w, group in clients.items() for s, c in enumerate(group)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    close_all(clients)
    assert not failures, failures[:5]
    assert len(acknowledged) == WORKERS * PER_WORKER * (WRITES - 1)
    # one idempotency key sent to two processes at once: one record, the same answer twice
    assert len(twins) == WORKERS // 2 * PER_WORKER
    assert all(len(ids) == 2 and ids[0] == ids[1] for ids in twins.values()), twins
    with server.client(token) as reader:
        stored = every_record(reader, mid)
    ids = [r["id"] for r in stored]
    assert len(ids) == len(set(ids))  # nothing twice
    assert sorted(ids) == sorted([r["id"] for r in acknowledged.values()]
                                 + [v[0] for v in twins.values()])
    by_id = {r["id"]: r for r in stored}
    for key, record in acknowledged.items():
        assert by_id[record["id"]]["attributes"] == {"key": key}
        assert by_id[record["id"]]["content"] == record["content"]
    world["shared"] = (mid, len(ids))


def test_history_of_the_shared_memory_is_one_chain(world: dict[str, Any]) -> None:
    mid, records = world["shared"]
    # the memory's writes are one chain of changesets, one per record (the memory's own
    # creation is not a changeset): read from the store while the workers still run
    assert one_chain(world["backend"], mid) == records


def _proposal(world: dict[str, Any], alice: httpx.Client, bob: httpx.Client) -> tuple[str, Any]:
    mid = ok(alice.post("/v1/memories", json={"name": "Reviewed"}))["id"]
    ok(alice.post(f"/v1/memories/{mid}/grants",
                  json={"principal": f"member:{world['bob'].id}",
                        "privileges": ["read", "write"]}))
    ok(alice.post(f"/api/memory/{mid}/legacy-root", json={}), 201)
    root = ok(alice.get(f"/api/memory/{mid}/refs/shared/main"))["head_changeset_id"]
    mine = f"refs/agents/{world['alice'].id}/topic"
    ok(alice.post(f"/api/memory/{mid}/branches",
                  json={"ref_name": mine, "head_changeset_id": root}), 201)
    ok(alice.post("/api/memory/changesets", json={
        "project_id": mid, "ref_name": mine, "expected_head": root, "idempotency_key": "c1",
        "message": "one fact", "ops": [{"ordinal": 0, "op_type": "add_memory", "payload": {
            "content": "Acme renews in March", "kind": "fact", "scope": "acme"}}]}), 201)
    prop = ok(alice.post(f"/api/memory/{mid}/proposals", json={
        "source_ref": mine, "target_ref": "refs/shared/main", "idempotency_key": "p1",
        "message": "renewal"}), 201)
    ok(bob.post(f"/api/memory/proposals/{prop['proposal_id']}/reviews",
                json={"verdict": "approve", "comment": "checked"}), 201)
    return mid, prop


def test_a_merge_authorization_is_used_once_across_workers(world: dict[str, Any]) -> None:
    server = world["server"]
    with server.client(world["alice"].token) as alice, server.client(world["bob"].token) as bob:
        mid, prop = _proposal(world, alice, bob)
        req = ok(bob.post(f"/api/memory/proposals/{prop['proposal_id']}/authorize", json={}))
    body = {k: req[k] for k in ("ref_name", "expected_head", "new_head", "merge_proposal_id",
                                "reviewer_principal", "merge_authorization")}
    nonce = json.loads(req["merge_authorization"])["envelope"]["nonce"]
    clients = pinned(server, world["bob"].token, 2)
    answers: list[httpx.Response] = []
    gate = threading.Barrier(WORKERS * 2)

    def merge(client: httpx.Client) -> None:
        gate.wait()
        answers.append(client.post(f"/api/memory/{mid}/refs/merge", json=body))

    threads = [threading.Thread(target=merge, args=(c,)) for g in clients.values() for c in g]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    close_all(clients)
    statuses = sorted(r.status_code for r in answers)
    assert statuses == [200] + [409] * (WORKERS * 2 - 1), [r.text for r in answers]
    refused = {r.json()["error"] for r in answers if r.status_code == 409}
    # Each loser is refused before anything is written: its nonce was used, or (on PostgreSQL,
    # where a loser may read the proposal after the winner's commit) the proposal is closed.
    assert refused and refused <= {"authorization-replay", "proposal-closed"}, refused
    won = next(r.json() for r in answers if r.status_code == 200)
    assert won["advance"]["authorization_nonce"] == nonce
    assert won["ref"]["head_changeset_id"] == prop["head_changeset_id"]


def test_a_revoked_credential_is_refused_by_every_worker_at_once(world: dict[str, Any]) -> None:
    server, bot = world["server"], world["bot"]
    clients = pinned(server, bot.token, 1)
    for group in clients.values():  # accepted (and cached) on every worker
        ok(group[0].get("/v1/memories"))
        ok(group[0].get("/v1/memories"))
    creds = admin(world["backend"], "credential", "list", "--member", bot.id)
    admin(world["backend"], "credential", "revoke", creds[0]["id"])
    for group in clients.values():  # the very next request, on each process
        err(group[0].get("/v1/memories"), 401, "invalid_credential")
    close_all(clients)


def test_kill_9_of_one_worker_loses_no_acknowledged_write(backend: Backend) -> None:
    made = provision(backend.data_dir, [], database=backend.database_url)
    server = start(backend.data_dir, "--workers", str(WORKERS), *backend.serve_args())
    token = made["owner"].token
    try:
        with server.client(token) as owner:
            mid = ok(owner.post("/v1/memories", json={"name": "Crash"}))["id"]
        clients = pinned(server, token, 4)
        victim = server.announce["workers"][0]
        victim_index = worker_of(clients[0][0])  # worker indexes follow the announced pids
        url = f"/v1/memories/{mid}/records"
        acknowledged: dict[str, str] = {}
        after_kill: dict[int, int] = dict.fromkeys(clients, 0)
        killed = threading.Event()
        enough = threading.Event()
        stop = threading.Event()
        lock = threading.Lock()

        def write(worker: int, slot: int, client: httpx.Client) -> None:
            for n in range(100_000):
                if stop.is_set():
                    return
                key = f"w{worker}-s{slot}-n{n}"
                try:
                    response = client.post(url, json={"type": "note", "content": key},
                                           headers={"Idempotency-Key": key})
                except httpx.HTTPError:
                    if worker == victim_index:
                        return  # its process died under this request
                    raise
                if response.status_code != 200:
                    return
                with lock:
                    acknowledged[key] = response.json()["id"]
                    if killed.is_set():
                        after_kill[worker] += 1
                    if len(acknowledged) >= 80:
                        enough.set()

        threads = [threading.Thread(target=write, args=(w, s, c))
                   for w, group in clients.items() for s, c in enumerate(group)]
        for thread in threads:
            thread.start()
        assert enough.wait(timeout=120), server.stderr()
        os.kill(victim, signal.SIGKILL)
        killed.set()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # the others keep answering
            with lock:
                if all(after_kill[w] >= 5 for w in clients if w != victim_index):
                    break
            time.sleep(0.05)
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
        close_all(clients)
        assert all(after_kill[w] >= 5 for w in clients if w != victim_index), after_kill
        # the supervisor started a worker in the dead one's place, and it answers
        replacement = _replacement(server, victim)
        assert replacement is not None, server.stderr()
        assert "worker-exit" in server.stderr() and "killed by signal 9" in server.stderr()
        with server.client(token) as reader:
            stored = every_record(reader, mid)
        ids = [r["id"] for r in stored]
        assert len(ids) == len(set(ids))
        missing = set(acknowledged.values()) - set(ids)
        assert not missing, f"{len(missing)} acknowledged writes lost"
        by_id = {r["id"]: r["content"] for r in stored}
        for key, rid in acknowledged.items():
            assert by_id[rid] == [{"type": "text", "text": key}]
    finally:
        assert server.stop() == 0, server.stderr()
    assert one_chain(backend, mid) == len(ids)
    with MemoryService(backend.data_dir, database=backend.database_url) as svc:
        assert svc.rebuild()["equal"] is True


def _replacement(server: Server, victim: int) -> int | None:
    """A worker process of the supervisor that was not there at start."""
    first = set(server.announce["workers"])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        children = Path(f"/proc/{server.proc.pid}/task/{server.proc.pid}/children")
        now = {int(p) for p in children.read_text().split()} if children.exists() else set()
        fresh = now - first
        if fresh and victim not in now:
            return fresh.pop()
        time.sleep(0.1)
    return None


def test_past_the_write_wait_every_worker_answers_503_with_retry_after(world: dict[str, Any]
                                                                        ) -> None:
    server, backend, token = world["server"], world["backend"], world["owner"].token
    with server.client(token) as owner:
        mid = ok(owner.post("/v1/memories", json={"name": "Busy"}))["id"]
    clients = pinned(server, token, 1)
    url = f"/v1/memories/{mid}/records"
    with other_writer(backend, mid):  # another process writing, past every worker's wait
        for group in clients.values():
            refused = group[0].post(url, json={"content": "later"},
                                    headers={"Idempotency-Key": "k1"})
            error = err(refused, 503, "memory_unavailable")
            assert refused.headers["retry-after"] == "1"
            assert "busy" in error["message"] and "lock" not in error["message"]
            ok(group[0].get(url))  # reads do not wait for the writer
    answers = [ok(g[0].post(url, json={"content": "later"}, headers={"Idempotency-Key": "k1"}))
               for g in clients.values()]
    assert all(a == answers[0] for a in answers)  # the retries wrote it once
    with server.client(token) as reader:
        assert len(every_record(reader, mid)) == 1
    close_all(clients)
