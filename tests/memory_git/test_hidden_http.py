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
        conflict = {"conflict_id": "c" * 64, "conflict_type": "duplicate", "severity": "low",
                    "summary": "a hidden conflict"}
        ok(alice.post(f"/api/memory/{mem}/conflicts/persist",
                      json={"proposal_id": prop["proposal_id"], "conflicts": [conflict]}))
        # carol's own memory, where she may do everything: she names alice's objects from it
        own = ok(carol.post("/v1/memories", json={"name": "Carol's"}))["id"]
        ok(carol.post(f"/api/memory/{own}/legacy-root", json={}), 201)
        own_root = ok(carol.get(f"/api/memory/{own}/refs/shared/main"))["head_changeset_id"]
        ok(carol.post(f"/api/memory/{own}/branches",
                      json={"ref_name": "refs/topics/c", "head_changeset_id": own_root}), 201)
        yield {"server": server, "alice": alice, "carol": carol, "mem": mem,
               "cs": cs["changeset_id"], "proposal": prop["proposal_id"],
               "manifest": manifest["manifest_id"], "conflict": conflict["conflict_id"],
               "root": root, "own": own, "own_root": own_root,
               "bob_ref": ref}
    finally:
        server.stop()


def by_id_routes(w: dict[str, Any], cs: str, proposal: str, manifest: str
                 ) -> list[tuple[str, str, dict[str, Any] | None]]:
    return [
        ("GET", f"/api/memory/changesets/{cs}", None),
        ("POST", f"/api/memory/changesets/{cs}/diff", {"base_changeset_id": cs}),
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


def _differs(client: httpx.Client, method: str, paths: tuple[str, str],
             bodies: tuple[dict[str, Any] | None, dict[str, Any] | None]) -> list[Any]:
    """How the answers for a hidden object and an unknown one differ (none: ``[]``); both
    must be a refusal in the reference's shape."""
    seen = call(client, method, paths[0], bodies[0])
    absent = call(client, method, paths[1], bodies[1])
    if (seen.status_code, seen.text) != (absent.status_code, absent.text):
        return [(method, paths[0], seen.status_code, seen.text, absent.status_code,
                 absent.text)]
    if seen.status_code not in (400, 404) or set(seen.json()) != {"error", "message"}:
        return [(method, paths[0], "not a refusal", seen.status_code, seen.text)]
    return []


def test_every_project_route_answers_a_hidden_project_as_an_unknown_one(
        world: dict[str, Any]) -> None:
    """Writes and reads under ``/api/memory/{project}``, for a memory the caller cannot see
    and for one that does not exist (each with a body that would be valid there)."""
    mem, root, cs, pid = world["mem"], world["root"], world["cs"], world["proposal"]
    routes: list[tuple[str, str, dict[str, Any] | None]] = [
        ("GET", "refs/resolve?name=refs/shared/main", None),
        ("GET", f"refs/{world['bob_ref']}", None),
        ("POST", "legacy-root", {}),
        ("POST", "branches", {"ref_name": "refs/topics/t", "head_changeset_id": root}),
        ("POST", "refs/advance", {"ref_name": "refs/topics/t", "expected_head": root,
                                  "new_head": cs}),
        ("POST", "refs/refs/topics/t/advance", {"expected_head": root, "new_head": cs}),
        ("POST", "refs/merge", {"ref_name": "refs/shared/main", "expected_head": root,
                                "new_head": cs, "merge_proposal_id": pid}),
        ("POST", "context", {"head_changeset_id": root}),
        ("GET", f"context?head={root}", None),
        ("POST", "conflicts/detect", {"base_changeset_id": root, "left_changeset_id": root,
                                      "right_changeset_id": cs}),
        ("POST", f"conflicts/{world['conflict']}/resolve", {"resolution_note": "fine"}),
        ("POST", "conflicts/persist", {"proposal_id": pid, "conflicts": []}),
        ("POST", "conflicts/retire", {"proposal_id": pid, "status": "resolved"}),
        ("POST", "proposals", {"source_ref": world["bob_ref"], "idempotency_key": "x"}),
        ("PUT", "settings", {"review_required": True}),
        ("POST", "records", {"content": [{"kind": "text", "text": "x"}]}),
    ]
    found = [d for method, suffix, body in routes for d in _differs(
        world["carol"], method,
        (f"/api/memory/{mem}/{suffix}", f"/api/memory/hmem_doesnotexist/{suffix}"),
        (body, body))]
    assert found == []


def test_ids_named_in_a_body_answer_as_unknown_ones_when_hidden(world: dict[str, Any]) -> None:
    """From her own memory, carol names alice's changesets, proposals and conflicts in a
    request body or path: each answers exactly as an id that exists nowhere."""
    own, own_root = world["own"], world["own_root"]
    hidden_cs, hidden_pid = world["cs"], world["proposal"]
    cases: list[tuple[str, str, dict[str, Any], dict[str, Any]]] = [
        ("POST", f"/api/memory/{own}/branches",
         {"ref_name": "refs/topics/a", "head_changeset_id": hidden_cs},
         {"ref_name": "refs/topics/a", "head_changeset_id": UNKNOWN_CS}),
        ("POST", f"/api/memory/{own}/context", {"head_changeset_id": hidden_cs},
         {"head_changeset_id": UNKNOWN_CS}),
        ("POST", f"/api/memory/{own}/conflicts/detect",
         {"base_changeset_id": own_root, "left_changeset_id": own_root,
          "right_changeset_id": hidden_cs},
         {"base_changeset_id": own_root, "left_changeset_id": own_root,
          "right_changeset_id": UNKNOWN_CS}),
        ("POST", f"/api/memory/changesets/{own_root}/diff", {"base_changeset_id": hidden_cs},
         {"base_changeset_id": UNKNOWN_CS}),
        ("POST", f"/api/memory/{own}/conflicts/persist",
         {"proposal_id": hidden_pid, "conflicts": [{"conflict_id": "d" * 64,
                                                    "conflict_type": "duplicate",
                                                    "severity": "low", "summary": "s"}]},
         {"proposal_id": UNKNOWN_ID, "conflicts": [{"conflict_id": "d" * 64,
                                                    "conflict_type": "duplicate",
                                                    "severity": "low", "summary": "s"}]}),
        ("POST", f"/api/memory/{own}/conflicts/retire",
         {"proposal_id": hidden_pid, "status": "resolved"},
         {"proposal_id": UNKNOWN_ID, "status": "resolved"}),
        ("POST", f"/api/memory/{own}/refs/merge",
         {"ref_name": "refs/shared/main", "expected_head": own_root, "new_head": hidden_cs,
          "merge_proposal_id": hidden_pid},
         {"ref_name": "refs/shared/main", "expected_head": own_root, "new_head": UNKNOWN_CS,
          "merge_proposal_id": UNKNOWN_ID}),
        ("POST", f"/api/memory/{own}/refs/refs/topics/c/advance",
         {"expected_head": own_root, "new_head": hidden_cs},
         {"expected_head": own_root, "new_head": UNKNOWN_CS}),
        ("POST", f"/api/memory/{own}/refs/advance",
         {"ref_name": "refs/topics/c", "expected_head": own_root, "new_head": hidden_cs},
         {"ref_name": "refs/topics/c", "expected_head": own_root, "new_head": UNKNOWN_CS}),
    ]
    found = [d for method, path, seen_body, absent_body in cases
             for d in _differs(world["carol"], method, (path, path), (seen_body, absent_body))]
    found += _differs(world["carol"], "POST",
                      (f"/api/memory/{own}/conflicts/{world['conflict']}/resolve",
                       f"/api/memory/{own}/conflicts/{'e' * 64}/resolve"),
                      ({"resolution_note": "n"}, {"resolution_note": "n"}))
    assert found == []
