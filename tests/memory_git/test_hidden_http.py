"""Over real HTTP: every Memory Git by-id route answers a caller without access exactly as it
answers an id that does not exist (same status, same body), and every ``/api/memory`` error —
the router's own included — is the reference's ``{"error", "message"}`` with one code style."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.api.server import ok, provision, start

UNKNOWN_CS = "0" * 64
UNKNOWN_ID = "019a0000-0000-7000-8000-000000000000"
CODE = re.compile(r"[a-z]+(-[a-z]+)*")  # the one style of /api/memory codes: kebab-case


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    data_dir = tmp_path_factory.mktemp("hidden") / "data"
    members = provision(data_dir, (("alice", "human"), ("bob", "agent"), ("carol", "human")))
    server = start(data_dir, env={"PAL_MERGE_HMAC_KEY": "h" * 40})
    try:
        alice, bob = server.client(members["alice"].token), server.client(members["bob"].token)
        carol = server.client(members["carol"].token)
        mem = ok(alice.post("/v1/memories", json={"name": "Private"}))["id"]
        ok(alice.post(f"/v1/memories/{mem}/grants",
                      json={"principal": f"member:{members['bob'].id}",
                            "privileges": ["read", "write"]}))
        ok(alice.post(f"/api/memory/{mem}/legacy-root", json={}), 201)
        root = ok(alice.get(f"/api/memory/{mem}/refs/shared/main"))["head_changeset_id"]
        ref = f"refs/agents/{members['bob'].id}/main"
        ok(bob.post(f"/api/memory/{mem}/branches",
                    json={"ref_name": ref, "head_changeset_id": root}), 201)
        cs = ok(bob.post("/api/memory/changesets", json={
            "project_id": mem, "ref_name": ref, "expected_head": root, "idempotency_key": "c1",
            "ops": [{"op_type": "add_memory", "payload": {"content": "a hidden fact"}}]}), 201)
        prop = ok(bob.post(f"/api/memory/{mem}/proposals",
                           json={"source_ref": ref, "idempotency_key": "p1"}), 201)
        manifest = ok(alice.post(f"/api/memory/{mem}/context", json={"create_manifest": True}))
        yield {"server": server, "alice": alice, "carol": carol, "mem": mem,
               "cs": cs["changeset_id"], "proposal": prop["proposal_id"],
               "manifest": manifest["manifest_id"]}
    finally:
        server.stop()


def by_id_routes(w: dict[str, Any], cs: str, proposal: str, manifest: str
                 ) -> list[tuple[str, str, dict[str, Any] | None]]:
    return [
        ("GET", f"/api/memory/changesets/{cs}", None),
        ("POST", f"/api/memory/changesets/{cs}/diff", {}),
        ("GET", f"/api/memory/manifests/{manifest}", None),
        ("GET", f"/api/memory/proposals/{proposal}", None),
        ("POST", f"/api/memory/proposals/{proposal}/reviews", {"verdict": "approve"}),
        ("POST", f"/api/memory/proposals/{proposal}/cancel", {}),
        ("POST", f"/api/memory/proposals/{proposal}/authorize", {}),
    ]


def call(client: httpx.Client, method: str, path: str, body: dict[str, Any] | None
         ) -> httpx.Response:
    return client.request(method, path, json=body) if body is not None else client.request(
        method, path)


def test_hidden_and_unknown_ids_answer_the_same(world: dict[str, Any]) -> None:
    hidden = by_id_routes(world, world["cs"], world["proposal"], world["manifest"])
    unknown = by_id_routes(world, UNKNOWN_CS, UNKNOWN_ID, UNKNOWN_ID)
    for (method, hpath, body), (_, upath, _) in zip(hidden, unknown, strict=True):
        seen = call(world["carol"], method, hpath, body)
        absent = call(world["carol"], method, upath, body)
        assert seen.status_code == absent.status_code == 404, (hpath, seen.text, absent.text)
        assert seen.json() == absent.json(), (hpath, seen.json(), absent.json())
        assert set(seen.json()) == {"error", "message"}
        # and for someone who may see it, the object is really there
        if method == "GET":
            ok(world["alice"].get(hpath))


def test_hidden_and_unknown_projects_answer_the_same(world: dict[str, Any]) -> None:
    for suffix in ("refs", "refs/shared/main", "changesets?ref=refs/shared/main", "context",
                   "proposals", "conflicts", "settings"):
        seen = world["carol"].get(f"/api/memory/{world['mem']}/{suffix}")
        absent = world["carol"].get(f"/api/memory/hmem_doesnotexist/{suffix}")
        assert seen.status_code == absent.status_code == 404, (suffix, seen.text)
        assert seen.json() == absent.json(), suffix


@pytest.mark.parametrize(("method", "path", "status"), [
    ("GET", "/api/memory/{mem}/refs/bad%0Aname", 404),  # no route matches a newline
    ("GET", "/api/memory/{mem}/no-such-route/at/all", 404),
    ("DELETE", "/api/memory/{mem}/refs", 405),
    ("GET", "/api/memory/{mem}/changesets?limit=abc", 400),
    ("GET", "/api/memory/{mem}/conflicts?limit=0", 400),
    ("POST", "/api/memory/changesets", 400),
])
def test_every_api_memory_error_has_the_reference_shape(world: dict[str, Any], method: str,
                                                        path: str, status: int) -> None:
    resp = world["alice"].request(method, path.format(mem=world["mem"]),
                                  content=b"{not json" if method == "POST" else None,
                                  headers={"content-type": "application/json"})
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert set(body) == {"error", "message"}, body
    assert CODE.fullmatch(body["error"]), body


def test_codes_are_one_style_across_conflicts_and_refusals(world: dict[str, Any]) -> None:
    alice = world["alice"]
    stale = alice.post("/api/memory/changesets", json={
        "project_id": world["mem"], "ref_name": "refs/topics/t1", "expected_head": UNKNOWN_CS,
        "create_ref_if_missing": True, "idempotency_key": "x",
        "ops": [{"op_type": "add_memory", "payload": {"content": "x"}}]})
    assert stale.status_code == 409
    assert stale.json()["error"] == "cas-mismatch"
    forbidden = world["carol"].post("/api/memory/changesets", json={
        "project_id": world["mem"], "ref_name": "refs/topics/t1", "idempotency_key": "y",
        "ops": [{"op_type": "add_memory", "payload": {"content": "x"}}]})
    assert forbidden.status_code == 404 and forbidden.json()["error"] == "not-found"
