"""The remember hot path: the fast handler (api/fastpath.py), group commit (api/runtime.py and
service/grouped.py) and the credential cache (service/admin.cached_caller).

- The fast handler must answer exactly what the FastAPI route answers: the same requests go to
  two servers over the same kind of store, one with the fast handler and one without, and
  every answer must match byte for byte (status, headers, body), once the random ids and the
  per-server date header are set aside.
- Concurrent writers over a real ``pal serve`` are grouped into shared transactions: each
  write must still get its own record, its own changeset and its own idempotent replay.
- A credential the server has cached must stop working as soon as ``pal admin`` (another
  process) revokes it or changes what its member belongs to.
"""

from __future__ import annotations

import json
import re
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from click.testing import CliRunner

from palimpsest.api.app import ApiConfig, create_app
from palimpsest.cli.main import cli
from palimpsest.service import MemoryService
from palimpsest.service.memorygit.reviewed import ReviewedWrites
from palimpsest.service.memorygit.wiring import open_flow
from palimpsest.service.model import SHARED_MAIN
from tests.api.server import err, ok, provision, start


class _Clock:
    """The same fake epoch milliseconds in both stores, so timestamps agree."""

    def __init__(self) -> None:
        self.now = 1_790_000_000_000

    def __call__(self) -> int:
        self.now += 7
        return self.now


@dataclass
class _Side:
    url: str
    tokens: dict[str, str]
    memories: dict[str, str]
    stop: Any


def _serve(tmp: Path, *, fast: bool) -> _Side:
    svc = MemoryService(tmp / "data", clock=_Clock())
    made = svc.bootstrap_owner()
    assert made is not None
    owner = svc.caller(made[0].id)
    agent = svc.create_member("agent", "agent")
    _, agent_token = svc.issue_credential(agent.id)
    plain = svc.create_memory(owner, {"name": "plain"})["id"]
    reviewed = svc.create_memory(owner, {"name": "reviewed"})["id"]
    for mid in (plain, reviewed):
        svc.put_grant(owner, mid, {"principal": f"member:{agent.id}",
                                   "privileges": ["read", "write"]})
    ReviewedWrites(open_flow(svc)).put_settings(f"member:{owner.member.id}", reviewed,
                                                {"review_required": True})
    app = create_app(svc, ApiConfig(fast_paths=fast))
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    server = uvicorn.Server(uvicorn.Config(app, log_level="error", lifespan="on",
                                           server_header=False))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        thread.join(0.01)

    def stop() -> None:
        server.should_exit = True
        thread.join(timeout=30)
        svc.close()

    return _Side(f"http://127.0.0.1:{sock.getsockname()[1]}",
                 {"owner": made[1], "agent": agent_token},
                 {"plain": plain, "reviewed": reviewed}, stop)


@pytest.fixture
def sides(tmp_path: Path) -> Iterator[tuple[_Side, _Side]]:
    fast = _serve(tmp_path / "fast", fast=True)
    slow = _serve(tmp_path / "slow", fast=False)
    try:
        yield fast, slow
    finally:
        fast.stop()
        slow.stop()


_ID = re.compile(rb"h[a-z]{2,5}_[a-z2-7]{26}|[0-9a-f]{64}|mem_[0-9a-f]{24}"
                 rb"|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")

# (who, memory, headers, body bytes, path suffix) — every shape the route meets in practice
_BODY = {"type": "note", "title": "t", "content": [{"type": "text", "text": "x"}],
         "attributes": {"k": [1, 2.5, True, None]}, "time": {"valid_from": "2026-01-01T00:00:00Z"}}
_CASES: list[tuple[str, str, dict[str, str], bytes, str]] = [
    ("owner", "plain", {"Idempotency-Key": "k1"}, b'{"content": "hello"}', ""),
    ("owner", "plain", {"Idempotency-Key": "k1"}, b'{"content": "hello"}', ""),  # replay
    ("owner", "plain", {"Idempotency-Key": "k1"}, b'{"content": "other"}', ""),  # mismatch
    ("owner", "plain", {}, json.dumps(_BODY).encode(), ""),
    ("owner", "plain", {}, b'{"content": [{"type": "text", "text": "a"}, "b"]}', ""),
    ("owner", "plain", {}, b'{"content": "x", "written_by": "me"}', ""),  # unknown field
    ("owner", "plain", {}, b'{"content": 5}', ""),
    ("owner", "plain", {}, b'{"title": 1, "content": "x"}', ""),
    ("owner", "plain", {}, b'{"type": "", "content": "x"}', ""),
    ("owner", "plain", {}, b'[1, 2]', ""),
    ("owner", "plain", {}, b'{}', ""),
    ("owner", "plain", {"Idempotency-Key": "has space"}, b'{"content": "x"}', ""),
    ("owner", "plain", {"Idempotency-Key": "k" * 256}, b'{"content": "x"}', ""),
    ("owner", "nowhere", {}, b'{"content": "x"}', ""),
    ("owner", "long", {}, b'{"content": "x"}', ""),
    ("owner", "plain", {}, b'{"content": "x"}', "/"),  # trailing slash
    ("owner", "plain", {}, b'{"content": "x", "references": [{"rel": "supports", '
                           b'"record_id": "hrec_aaaaaaaaaaaaaaaaaaaaaaaaaa"}]}', ""),
    ("agent", "plain", {"Idempotency-Key": "a1"}, b'{"content": "agent note"}', ""),
    ("agent", "reviewed", {"Idempotency-Key": "a2"}, b'{"content": "needs review"}', ""),
    ("agent", "reviewed", {"Idempotency-Key": "a2"}, b'{"content": "needs review"}', ""),
]


def _exchange(side: _Side, client: httpx.Client, case: tuple[str, str, dict[str, str], bytes,
                                                             str]) -> tuple[Any, ...]:
    who, memory, headers, body, suffix = case
    mid = {"nowhere": "hmem_" + "a" * 26, "long": "m" * 201}.get(memory) \
        or side.memories[memory]
    response = client.post(f"/v1/memories/{mid}/records{suffix}", content=body,
                           headers={"Authorization": f"Bearer {side.tokens[who]}",
                                    "Content-Type": "application/json",
                                    "X-Request-Id": "same-on-both-sides", **headers})
    raw_headers = [(k, v.replace(side.url.encode(), b"<server>"))
                   for k, v in response.headers.raw if k.lower() != b"date"]
    return response.status_code, raw_headers, response.content


def _normalise(answers: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Random ids (records, members, memories, changesets) named by order of appearance."""
    names: dict[bytes, bytes] = {}

    def name(match: re.Match[bytes]) -> bytes:
        return names.setdefault(match.group(0), b"<id%d>" % len(names))

    return [(status, [(k, _ID.sub(name, v)) for k, v in headers], _ID.sub(name, body))
            for status, headers, body in answers]


def test_fast_path_answers_byte_for_byte_what_the_route_answers(
        sides: tuple[_Side, _Side]) -> None:
    fast, slow = sides
    answers = []
    for side in (fast, slow):
        with httpx.Client(base_url=side.url, timeout=30) as client:
            answers.append([_exchange(side, client, case) for case in _CASES])
    assert _normalise(answers[0]) == _normalise(answers[1])
    statuses = [a[0] for a in answers[0]]
    # the table really covers successes, replays, refusals and the review gate
    assert {200, 202, 404, 409, 422} <= set(statuses), statuses


def test_concurrent_writers_each_get_their_own_changeset(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    made = provision(data_dir, [])
    token = made["owner"].token
    server = start(data_dir)
    writers, per = 6, 15
    answers: dict[str, Any] = {}
    lock = threading.Lock()
    try:
        with server.client(token) as owner:
            mid = ok(owner.post("/v1/memories", json={"name": "busy"}))["id"]

        def write(w: int) -> None:
            with server.client(token) as client:
                for n in range(per):
                    key = f"w{w}-n{n}"
                    got = ok(client.post(f"/v1/memories/{mid}/records",
                                         json={"content": f"writer {w} note {n}"},
                                         headers={"Idempotency-Key": key}))
                    with lock:
                        answers[key] = got

        threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert len(answers) == writers * per
        with server.client(token) as owner:
            for key, first in list(answers.items())[::7]:  # a replay answers the first answer
                n = key.split("-n")[1]
                again = ok(owner.post(f"/v1/memories/{mid}/records",
                                      json={"content": f"writer {key[1:].split('-')[0]} "
                                                       f"note {n}"},
                                      headers={"Idempotency-Key": key}))
                assert again == first
            assert ok(owner.get(f"/v1/memories/{mid}"))["records"]["count"] == writers * per
    finally:
        server.stop()
    with MemoryService(data_dir) as svc:
        store = svc._store
        ref = store.ref(mid, SHARED_MAIN)
        keys = []
        head = ref.head if ref else None
        while head:  # one changeset per write, in one linear chain
            cs = store.changeset(head)
            assert cs is not None
            keys.append(cs.idempotency_key)
            head = cs.parent_ids[0] if cs.parent_ids else None
        assert sorted(keys) == sorted(answers)
        for w in range(writers):  # each writer's writes in the order it made them
            mine = [k for k in reversed(keys) if k.startswith(f"w{w}-")]
            assert mine == [f"w{w}-n{n}" for n in range(per)]
        assert svc.rebuild()["equal"] is True


def _admin(data_dir: Path, *args: str) -> Any:
    """``pal admin`` in this test process: not the server's process, not its connection."""
    result = CliRunner().invoke(cli, ["admin", "--data-dir", str(data_dir), *args, "--json"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_cached_credential_follows_pal_admin_in_another_process(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    made = provision(data_dir, [("bot", "agent")], {"readers": ["bot"]})
    server = start(data_dir)
    try:
        with server.client(made["owner"].token) as owner:
            mid = ok(owner.post("/v1/memories", json={"name": "team"}))["id"]
            ok(owner.post(f"/v1/memories/{mid}/grants",
                          json={"principal": f"group:{made['group:readers']}",
                                "privileges": ["read"]}))
        with server.client(made["bot"].token) as bot:
            for _ in range(3):  # authenticated once, then answered from the cache
                assert ok(bot.get(f"/v1/memories/{mid}"))["privileges"] == ["read"]
            _admin(data_dir, "group", "remove", made["group:readers"], made["bot"].id)
            err(bot.get(f"/v1/memories/{mid}"), 404, "memory_not_found")
            _admin(data_dir, "group", "add", made["group:readers"], made["bot"].id)
            assert ok(bot.get(f"/v1/memories/{mid}"))["privileges"] == ["read"]
            creds = _admin(data_dir, "credential", "list", "--member", made["bot"].id)
            _admin(data_dir, "credential", "revoke", creds[0]["id"])
            err(bot.get(f"/v1/memories/{mid}"), 401, "invalid_credential")
            err(bot.post(f"/v1/memories/{mid}/records", json={"content": "x"}), 401,
                "invalid_credential")
    finally:
        server.stop()
