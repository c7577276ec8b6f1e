"""The everyday Memory Git flow over real HTTP (``pal serve``) with two members, then every
refusal of the issue: self-review, self-merge, expired envelope, wrong key, tampered field,
replayed nonce, stale expected head, a changed request under a reused idempotency key, and
writing to another member's ref. Envelopes for the refusals are built by the independent
reference builder with the server's configured key (PAL_MERGE_HMAC_KEYS)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.server import ok, pal_command, provision, start
from tests.conftest import BOTH, Backend
from tests.memory_git import refenvelope as ref

KEY_OLD = "o" * 40
KEY_NEW = "n" * 40
ENV = {"PAL_MERGE_HMAC_KEYS": f"new={KEY_NEW},old={KEY_OLD}"}


BACKENDS = BOTH  # the review flow's refs, nonces and keys live in the store


@pytest.fixture(scope="module")
def world(module_backend: Backend) -> Iterator[dict[str, Any]]:
    data_dir: Path = module_backend.data_dir
    members = provision(data_dir, (("alice", "human"), ("bob", "agent")),
                        database=module_backend.database_url)
    server = start(data_dir, *module_backend.serve_args(), env=ENV)
    try:
        alice = server.client(members["alice"].token)
        bob = server.client(members["bob"].token)
        memory = ok(alice.post("/v1/memories", json={"name": "Acme",
                                                     "description": "account memory"}))
        ok(alice.post(f"/v1/memories/{memory['id']}/grants",
                      json={"principal": f"member:{members['bob'].id}",
                            "privileges": ["read", "write"]}))
        # the project's Memory Git root and alice's working ref, shared by the tests below
        ok(alice.post(f"/api/memory/{memory['id']}/legacy-root", json={}), 201)
        root = ok(alice.get(f"/api/memory/{memory['id']}/refs/shared/main"))["head_changeset_id"]
        ok(alice.post(f"/api/memory/{memory['id']}/branches",
                      json={"ref_name": f"refs/agents/{members['alice'].id}/main",
                            "head_changeset_id": root}), 201)
        yield {"server": server, "alice": alice, "bob": bob, "project": memory["id"],
               "ids": {n: f"member:{members[n].id}" for n in ("alice", "bob")},
               "mids": {n: members[n].id for n in ("alice", "bob")},
               "tokens": {n: members[n].token for n in ("alice", "bob")}}
    finally:
        server.stop()


def lethe_err(resp: httpx.Response, status: int, code: str | None = None) -> dict[str, Any]:
    assert resp.status_code == status, (resp.status_code, resp.text)
    body = resp.json()
    assert set(body) == {"error", "message"}, body
    if code is not None:
        assert body["error"] == code, body
    return dict(body)


def head_of(client: httpx.Client, project: str, name: str) -> str | None:
    refs = ok(client.get(f"/api/memory/{project}/refs"))
    found = [r for r in refs if r["ref_name"] == name]
    return found[0]["head_changeset_id"] if found else None


def commit(client: httpx.Client, project: str, refname: str, key: str, content: str,  # noqa: PLR0917
           expected: str | None) -> httpx.Response:
    return client.post("/api/memory/changesets", json={
        "project_id": project, "ref_name": refname, "expected_head": expected,
        "idempotency_key": key, "message": f"add {key}",
        "ops": [{"ordinal": 0, "op_type": "add_memory",
                 "payload": {"content": content, "kind": "fact", "scope": "acme"}}]})


def proposal_ready(w: dict[str, Any], key: str, content: str) -> tuple[str, dict[str, Any]]:
    """Alice commits on her own ref and proposes; Bob approves. Returns (proposal id, proposal)."""
    alice, bob, p = w["alice"], w["bob"], w["project"]
    # a fresh topic branch from the current shared head, so the merge is a fast-forward
    mine = f"refs/agents/{w['mids']['alice']}/{key}"
    ok(alice.post(f"/api/memory/{p}/branches", json={
        "ref_name": mine, "head_changeset_id": head_of(alice, p, "refs/shared/main")}), 201)
    ok(commit(alice, p, mine, key, content, head_of(alice, p, mine)), 201)
    prop = ok(alice.post(f"/api/memory/{p}/proposals", json={
        "source_ref": mine, "target_ref": "refs/shared/main", "idempotency_key": f"p-{key}",
        "message": content}), 201)
    ok(bob.post(f"/api/memory/proposals/{prop['proposal_id']}/reviews",
                json={"verdict": "approve", "comment": "checked", "severity": "info"}), 201)
    return prop["proposal_id"], prop


def test_everyday_flow(world: dict[str, Any]) -> None:
    alice, bob, p = world["alice"], world["bob"], world["project"]
    # 0. the repository of the memory
    ok(alice.post(f"/api/memory/{p}/legacy-root", json={}), 201)
    assert p in ok(bob.get("/api/memory/projects"))["projects"]
    # 1. orient
    ctx = ok(alice.get(f"/api/memory/{p}/context", params={"ref": "refs/shared/main"}))
    assert ctx["projection_version"] == "memory-context/v1" and ctx["memories"] == []
    root = ctx["head_changeset_id"]
    # 2. branch
    mine = f"refs/agents/{world['mids']['alice']}/flow"
    made = ok(alice.post(f"/api/memory/{p}/branches",
                         json={"ref_name": mine, "head_changeset_id": root}), 201)
    assert made["created_by_principal"] == world["ids"]["alice"]
    # 3. commit with CAS and an idempotency key; the identical retry returns the original
    first = ok(commit(alice, p, mine, "c1", "Acme renews in March", root), 201)
    again = ok(commit(alice, p, mine, "c1", "Acme renews in March", root), 200)
    assert again == first and first["author_principal"] == world["ids"]["alice"]
    # 4. propose
    prop = ok(alice.post(f"/api/memory/{p}/proposals", json={
        "source_ref": mine, "target_ref": "refs/shared/main", "idempotency_key": "p1",
        "head_changeset_id": first["changeset_id"], "message": "renewal date"}), 201)
    assert prop["head_changeset_id"] == first["changeset_id"] and prop["base_changeset_id"] == root
    # 5. independent review
    verdict = ok(bob.post(f"/api/memory/proposals/{prop['proposal_id']}/reviews",
                          json={"verdict": "approve", "comment": "ok"}), 201)
    assert verdict["proposal_digest"] == prop["proposal_digest"]
    # 6. merge with a signed envelope (signed by the gateway side, verified by the Lethe side)
    req = ok(bob.post(f"/api/memory/proposals/{prop['proposal_id']}/authorize", json={}))
    envelope = json.loads(req["merge_authorization"])["envelope"]
    assert envelope["key_id"] == "new" and envelope["merger_principal"] == world["ids"]["bob"]
    merged = ok(bob.post(f"/api/memory/{p}/refs/merge", json={
        k: req[k] for k in ("ref_name", "expected_head", "new_head", "merge_proposal_id",
                            "reviewer_principal", "merge_authorization")}))
    assert merged["ref"]["head_changeset_id"] == first["changeset_id"]
    assert merged["advance"]["authorization_nonce"] == envelope["nonce"]
    # 7. read later, at the new head and at the old one
    now = ok(alice.get(f"/api/memory/{p}/context", params={"query": "renews"}))
    assert [m["content"] for m in now["memories"]] == ["Acme renews in March"]
    before = ok(bob.get(f"/api/memory/{p}/context", params={"head": root}))
    assert before["memories"] == []
    log = ok(bob.get(f"/api/memory/{p}/changesets", params={"ref": "refs/shared/main"}))
    assert [c["changeset_id"] for c in log["changesets"]] == [first["changeset_id"], root]
    shown = ok(bob.get(f"/api/memory/changesets/{first['changeset_id']}"))
    assert shown["integrity_digest"] == first["integrity_digest"]
    diff = ok(bob.post(f"/api/memory/changesets/{first['changeset_id']}/diff", json={}))
    assert len(diff["memories_added"]) == 1
    # the requirement's example: list refs with the bearer credential
    refs = ok(bob.get(f"/api/memory/{p}/refs"))
    assert {r["ref_name"] for r in refs} >= {"refs/shared/main", mine}
    assert ok(bob.get(f"/api/memory/{p}/refs/shared/main"))["protected"] is True


def test_unauthenticated_requests_are_refused(world: dict[str, Any]) -> None:
    anon = world["server"].client(None)
    assert anon.get(f"/api/memory/{world['project']}/refs").status_code == 401


def test_self_review_and_self_merge(world: dict[str, Any]) -> None:
    alice, bob, p = world["alice"], world["bob"], world["project"]
    mine = f"refs/agents/{world['mids']['alice']}/main"
    ok(commit(alice, p, mine, "s1", "self-reviewed?", head_of(alice, p, mine)), 201)
    prop = ok(alice.post(f"/api/memory/{p}/proposals", json={
        "source_ref": mine, "idempotency_key": "ps1"}), 201)
    lethe_err(alice.post(f"/api/memory/proposals/{prop['proposal_id']}/reviews",
                         json={"verdict": "approve"}), 403, "self-review")
    ok(bob.post(f"/api/memory/proposals/{prop['proposal_id']}/reviews",
                json={"verdict": "approve"}), 201)
    lethe_err(alice.post(f"/api/memory/proposals/{prop['proposal_id']}/authorize",
                         json={"reviewer_principal": world["ids"]["bob"]}), 403, "self-merge")
    # Alice signs for herself with the real key (as a rogue gateway would): still refused.
    req = ok(bob.post(f"/api/memory/proposals/{prop['proposal_id']}/authorize", json={}))
    env = json.loads(req["merge_authorization"])["envelope"]
    env.update({"merger_principal": world["ids"]["alice"], "key_id": "new",
                "nonce": "a1" * 16})
    body = {**req, "merge_authorization": ref.wire(env, ref.signature(env, KEY_NEW.encode()))}
    lethe_err(alice.post(f"/api/memory/{p}/refs/merge", json=body), 403, "self-merge")
    ok(bob.post(f"/api/memory/{p}/refs/merge", json=req))


def signed_request(w: dict[str, Any], pid: str, prop: dict[str, Any], *, key: str = KEY_NEW,
                   key_id: str = "new", ttl: timedelta = timedelta(minutes=10),
                   issued: datetime | None = None, **over: str) -> dict[str, Any]:
    """A merge request whose envelope the independent builder signs."""
    p = w["project"]
    expected = head_of(w["bob"], p, "refs/shared/main")
    issued_at, expires_at = ref.times(issued or datetime.now(UTC), ttl)
    fields = {"version": "memory-git-merge/v2", "project_id": p, "ref_name": "refs/shared/main",
              "expected_head": expected, "new_head": prop["head_changeset_id"],
              "proposal_id": pid, "proposal_digest": prop["proposal_digest"],
              "reviewer_principal": w["ids"]["bob"], "merger_principal": w["ids"]["bob"],
              "strategy": "fast_forward", "issued_at": issued_at, "expires_at": expires_at,
              "nonce": over.pop("nonce", "5e" * 16), "key_id": key_id}
    env = ref.envelope(**fields)
    wire = ref.wire(env, ref.signature(env, key.encode()))
    body = {"ref_name": "refs/shared/main", "expected_head": expected,
            "new_head": prop["head_changeset_id"], "merge_proposal_id": pid,
            "reviewer_principal": w["ids"]["bob"], "merge_authorization": wire}
    body.update(over)
    return body


def test_envelope_refusals_then_independent_envelope_merges(world: dict[str, Any]) -> None:
    bob, p = world["bob"], world["project"]
    pid, prop = proposal_ready(world, "e1", "envelope checks")
    url = f"/api/memory/{p}/refs/merge"
    expired = signed_request(world, pid, prop,
                             issued=datetime.now(UTC) - timedelta(minutes=20))
    lethe_err(bob.post(url, json=expired), 400, "merge-authorization")
    wrong_key = signed_request(world, pid, prop, key="w" * 40)
    body = lethe_err(bob.post(url, json=wrong_key), 403, "merge-authorization")
    assert body["message"] == "invalid merge authorization"
    unknown_id = signed_request(world, pid, prop, key_id="retired")
    lethe_err(bob.post(url, json=unknown_id), 403, "merge-authorization")
    too_long = signed_request(world, pid, prop, ttl=timedelta(minutes=16))
    lethe_err(bob.post(url, json=too_long), 400, "merge-authorization")
    good = signed_request(world, pid, prop, key=KEY_OLD, key_id="old")  # rotation: old key
    doc = json.loads(good["merge_authorization"])
    for name in ref.ORDER:  # every single-field mutation of a valid envelope is refused
        mutated = dict(doc["envelope"])
        mutated[name] = mutated[name] + "0"
        tampered = {**good, "merge_authorization": ref.wire(mutated, doc["signature"])}
        status = bob.post(url, json=tampered).status_code
        assert status in (400, 403), (name, status)
    assert head_of(bob, p, "refs/shared/main") == good["expected_head"]
    merged = ok(bob.post(url, json=good))
    assert merged["ref"]["head_changeset_id"] == prop["head_changeset_id"]
    lethe_err(bob.post(url, json=good), 409, "authorization-replay")


def test_stale_expected_head_is_refused(world: dict[str, Any]) -> None:
    bob, p = world["bob"], world["project"]
    pid, prop = proposal_ready(world, "st1", "stale head check")
    body = signed_request(world, pid, prop, nonce="77" * 16)
    other, other_prop = proposal_ready(world, "st2", "moves the target first")
    ok(bob.post(f"/api/memory/{p}/refs/merge",
                json=ok(bob.post(f"/api/memory/proposals/{other}/authorize", json={}))))
    assert other_prop["proposal_id"] == other
    refused = lethe_err(bob.post(f"/api/memory/{p}/refs/merge", json=body), 409)
    assert refused["error"] in ("cas-mismatch", "merge-shape")
    # A stale CAS on a plain commit: 409 naming both heads.
    alice = world["alice"]
    mine = f"refs/agents/{world['mids']['alice']}/main"
    stale = lethe_err(commit(alice, p, mine, "st3", "late", "0" * 8), 409, "cas-mismatch")
    assert "expected head" in stale["message"] and "current head" in stale["message"]


def test_idempotency_key_reused_for_another_request(world: dict[str, Any]) -> None:
    alice, p = world["alice"], world["project"]
    mine = f"refs/agents/{world['mids']['alice']}/main"
    head = head_of(alice, p, mine)
    ok(commit(alice, p, mine, "idem", "original", head), 201)
    lethe_err(commit(alice, p, mine, "idem", "changed", head), 409, "idempotency-mismatch")


def test_writing_to_another_members_ref(world: dict[str, Any]) -> None:
    alice, bob, p = world["alice"], world["bob"], world["project"]
    theirs = f"refs/agents/{world['mids']['alice']}/main"
    lethe_err(commit(bob, p, theirs, "intrude", "not yours", head_of(bob, p, theirs)), 403,
              "ref-not-owned")
    lethe_err(bob.post(f"/api/memory/{p}/branches",
                       json={"ref_name": f"refs/agents/{world['mids']['alice']}/evil"}), 403)
    lethe_err(commit(alice, p, "refs/shared/main", "direct", "bypass review",
                     head_of(alice, p, "refs/shared/main")), 403, "protected-ref")
    lethe_err(bob.post(f"/api/memory/{p}/refs/advance", json={
        "ref_name": theirs, "expected_head": head_of(bob, p, theirs),
        "new_head": head_of(bob, p, "refs/shared/main")}), 403, "ref-not-owned")


def test_closed_payload_keys_at_the_boundary(world: dict[str, Any]) -> None:
    alice, p = world["alice"], world["project"]
    mine = f"refs/agents/{world['mids']['alice']}/main"
    resp = alice.post("/api/memory/changesets", json={
        "project_id": p, "ref_name": mine, "expected_head": head_of(alice, p, mine),
        "idempotency_key": "closed", "ops": [{"op_type": "add_memory",
                                              "payload": {"content": "x", "rogue": True}}]})
    body = lethe_err(resp, 400, "unknown-payload-key")
    assert "rogue" in body["message"]


def pal(w: dict[str, Any], who: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PAL_URL": w["server"].url, "PAL_CREDENTIAL": w["tokens"][who]}
    return subprocess.run(pal_command("memory-git", *args), capture_output=True, text=True,
                          env=env, timeout=60, check=False)


def test_cli_flow_against_the_running_server(world: dict[str, Any]) -> None:
    p = world["project"]
    mine = f"refs/agents/{world['mids']['bob']}/main"
    assert pal(world, "alice", "init", p).returncode == 0  # idempotent
    assert pal(world, "bob", "branch", p, mine).returncode == 0
    made = pal(world, "bob", "--json", "commit", p, mine, "--add", "Bob's note\x1b[31m",
               "--kind", "observation", "-m", "cli")
    assert made.returncode == 0, made.stderr
    prop = json.loads(pal(world, "bob", "--json", "propose", p, mine).stdout)
    denied = pal(world, "bob", "review", prop["proposal_id"], "approve")
    assert denied.returncode == 1 and denied.stdout == ""
    assert denied.stderr.startswith("pal: ") and "self-review" in denied.stderr
    assert denied.stderr.count("\n") == 1
    assert pal(world, "alice", "review", prop["proposal_id"], "approve").returncode == 0
    merged = pal(world, "alice", "--json", "merge", p, prop["proposal_id"])
    assert merged.returncode == 0, merged.stderr
    shown = pal(world, "alice", "context", p, "--query", "note")
    assert shown.returncode == 0 and "Bob's note" in shown.stdout
    assert "\x1b" not in shown.stdout  # author text never reaches the terminal as controls
    as_json = json.loads(pal(world, "alice", "--json", "context", p, "--query", "note").stdout)
    assert as_json["memories"][0]["content"] == "Bob's note\x1b[31m"
    shown = pal(world, "alice", "proposal", prop["proposal_id"])
    assert shown.returncode == 0 and "merged" in shown.stdout and "approve by" in shown.stdout
    refused = pal(world, "bob", "settings", p, "--review-required")
    assert refused.returncode == 1 and "(forbidden)" in refused.stderr
    assert "review_required: false" in pal(world, "bob", "settings", p).stdout


def test_reviewed_memory_takes_agent_writes_as_proposals(world: dict[str, Any]) -> None:
    alice, bob = world["alice"], world["bob"]
    reviewed = ok(alice.post("/v1/memories", json={"name": "Policies"}))["id"]
    ok(alice.post(f"/v1/memories/{reviewed}/grants",
                  json={"principal": world["ids"]["bob"], "privileges": ["read", "write"]}))
    write = {"type": "fact", "title": "Refunds", "content": "Refunds within 30 days"}
    not_yet = bob.post(f"/api/memory/{reviewed}/records", json=write,
                       headers={"Idempotency-Key": "w0"})
    lethe_err(not_yet, 409, "review-not-required")
    lethe_err(bob.put(f"/api/memory/{reviewed}/settings", json={"review_required": True}),
              403, "forbidden")
    on = ok(alice.put(f"/api/memory/{reviewed}/settings", json={"review_required": True}))
    assert on["review_required"] is True and on["reviewed_types"] == ["agent"]
    pending = ok(bob.post(f"/api/memory/{reviewed}/records", json=write,
                          headers={"Idempotency-Key": "w1"}), 202)
    assert pending["object"] == "memory.pending_review"
    again = ok(bob.post(f"/api/memory/{reviewed}/records", json=write,
                        headers={"Idempotency-Key": "w1"}), 202)
    assert again == pending
    # accepted memory is unchanged; the author sees its own pending ref on request
    assert ok(alice.get(f"/api/memory/{reviewed}/context"))["memories"] == []
    own = ok(bob.get(f"/api/memory/{reviewed}/context", params={"ref": pending["ref_name"]}))
    assert [m["content"] for m in own["memories"]] == ["Refunds\nRefunds within 30 days"]
    lethe_err(alice.get(f"/api/memory/{reviewed}/context", params={"ref": pending["ref_name"]}),
              403, "ref-not-owned")
    # a second pending write replaces the open proposal (the old one is canceled, kept)
    second = ok(bob.post(f"/api/memory/{reviewed}/records", json={"content": "Keep receipts"},
                         headers={"Idempotency-Key": "w2"}), 202)
    old = ok(alice.get(f"/api/memory/proposals/{pending['proposal_id']}"))
    assert old["status"] == "canceled"
    pending = second
    ok(alice.post(f"/api/memory/proposals/{pending['proposal_id']}/reviews",
                  json={"verdict": "approve"}), 201)
    req = ok(alice.post(f"/api/memory/proposals/{pending['proposal_id']}/authorize", json={}))
    ok(alice.post(f"/api/memory/{reviewed}/refs/merge", json=req))
    accepted = ok(bob.get(f"/api/memory/{reviewed}/context"))["memories"]
    assert {m["content"] for m in accepted} == {"Refunds\nRefunds within 30 days",
                                                "Keep receipts"}
    changed = bob.post(f"/api/memory/{reviewed}/records", json={**write, "content": "90 days"},
                       headers={"Idempotency-Key": "w1"})
    lethe_err(changed, 409, "idempotency-mismatch")


def test_one_history_uhp_writes_and_reviewed_merges(world: dict[str, Any]) -> None:
    """UHP writes and Memory Git share one history: a merge changes what UHP reads return,
    and a Memory Git correction can target a record written through the UHP routes."""
    alice, bob = world["alice"], world["bob"]
    mem = ok(alice.post("/v1/memories", json={"name": "Shared history"}))["id"]
    ok(alice.post(f"/v1/memories/{mem}/grants",
                  json={"principal": world["ids"]["bob"], "privileges": ["read", "write"]}))
    uhp = ok(alice.post(f"/v1/memories/{mem}/records",
                        json={"type": "fact", "content": "The office opens at 9"}))
    shared = ok(bob.get(f"/api/memory/{mem}/refs/shared/main"))
    log = ok(bob.get(f"/api/memory/{mem}/changesets"))["changesets"]
    assert log[0]["changeset_id"] == shared["head_changeset_id"]
    assert log[0]["ops"][0]["op_type"] == "add_record"
    mine = f"refs/agents/{world['mids']['bob']}/main"
    ok(bob.post(f"/api/memory/{mem}/branches",
                json={"ref_name": mine, "head_changeset_id": shared["head_changeset_id"]}), 201)
    fix = ok(bob.post("/api/memory/changesets", json={
        "project_id": mem, "ref_name": mine, "expected_head": shared["head_changeset_id"],
        "idempotency_key": "fix", "message": "correct opening time",
        "ops": [{"op_type": "correct_memory", "target_event_id": uhp["id"],
                 "payload": {"content": "The office opens at 8", "kind": "fact"}},
                {"op_type": "add_memory", "payload": {"content": "Closed on Sundays"}}]}), 201)
    listed = {r["id"] for r in ok(alice.get(f"/v1/memories/{mem}/records"))["data"]}
    assert listed == {uhp["id"]}  # nothing unreviewed reaches accepted memory
    prop = ok(bob.post(f"/api/memory/{mem}/proposals",
                       json={"source_ref": mine, "idempotency_key": "fixp"}), 201)
    ok(alice.post(f"/api/memory/proposals/{prop['proposal_id']}/reviews",
                  json={"verdict": "approve"}), 201)
    ok(alice.post(f"/api/memory/{mem}/refs/merge",
                  json=ok(alice.post(f"/api/memory/proposals/{prop['proposal_id']}/authorize",
                                     json={}))))
    corrected, added = (op["resulting_event_id"] for op in fix["ops"])
    records = ok(alice.get(f"/v1/memories/{mem}/records"))["data"]
    texts = {r["id"]: r["content"][0]["text"] for r in records}
    assert texts == {corrected: "The office opens at 8", added: "Closed on Sundays"}
    old = ok(alice.get(f"/v1/memories/{mem}/records/{uhp['id']}"))
    assert old["status"] == "forgotten"  # its trace stays
    found = ok(alice.post(f"/v1/memories/{mem}/recall", json={"text": "Sundays"}))
    assert [r["record"]["id"] for r in found["results"]] == [added]
    # a UHP write after the merge extends the same shared history
    ok(alice.post(f"/v1/memories/{mem}/records", json={"content": "Parking in the back"}))
    head = ok(bob.get(f"/api/memory/{mem}/refs/shared/main"))["head_changeset_id"]
    assert ok(bob.get(f"/api/memory/changesets/{head}"))["parent_ids"] == [fix["changeset_id"]]


def test_uhp_write_route_diverts_agents_in_a_reviewed_memory(world: dict[str, Any]) -> None:
    alice, bob = world["alice"], world["bob"]
    mem = ok(alice.post("/v1/memories", json={"name": "Reviewed via UHP"}))["id"]
    ok(alice.post(f"/v1/memories/{mem}/grants",
                  json={"principal": world["ids"]["bob"], "privileges": ["read", "write"]}))
    ok(alice.put(f"/api/memory/{mem}/settings", json={"review_required": True}))
    # bob is an agent: his UHP write becomes a proposal; alice (a person) writes directly
    pending = ok(bob.post(f"/v1/memories/{mem}/records", json={"content": "Agent claim"},
                          headers={"Idempotency-Key": "u1"}), 202)
    assert pending["object"] == "memory.pending_review"
    direct = ok(alice.post(f"/v1/memories/{mem}/records", json={"content": "Person fact"}))
    listed = [r["id"] for r in ok(bob.get(f"/v1/memories/{mem}/records"))["data"]]
    assert listed == [direct["id"]]
    # recall reads accepted memory; the author's own pending memory only on request
    plain = ok(bob.post(f"/v1/memories/{mem}/recall", json={"text": "claim"}))
    assert plain["results"] == [] and "x.pal.pending" not in plain
    mine = ok(bob.post(f"/v1/memories/{mem}/recall",
                       json={"text": "claim", "x.pal.include_pending": True}))
    assert mine["results"] == []
    assert [m["memory_id"] for m in mine["x.pal.pending"]["memories"]] == [pending["memory_id"]]
    theirs = ok(alice.post(f"/v1/memories/{mem}/recall",
                           json={"text": "claim", "x.pal.include_pending": True}))
    assert theirs["x.pal.pending"]["memories"] == []  # never someone else's pending ref
    ok(alice.post(f"/api/memory/proposals/{pending['proposal_id']}/reviews",
                  json={"verdict": "approve"}), 201)
    req = ok(alice.post(f"/api/memory/proposals/{pending['proposal_id']}/authorize", json={}))
    assert req["strategy"] == "merge_commit"  # alice's direct write moved shared meanwhile
    ok(alice.post(f"/api/memory/{mem}/refs/merge", json=req))
    listed = {r["id"] for r in ok(bob.get(f"/v1/memories/{mem}/records"))["data"]}
    assert listed == {direct["id"], pending["memory_id"]}


def test_two_reviewers_merge_at_once_over_http(world: dict[str, Any]) -> None:
    """Two merges into refs/shared/main race over real sockets: exactly one CAS wins; the loser
    is told to re-read, and its nonce is not consumed (docs/memory-git.md)."""
    import threading

    alice, bob = world["alice"], world["bob"]
    mem = ok(alice.post("/v1/memories", json={"name": "Race"}))["id"]
    ok(alice.post(f"/v1/memories/{mem}/grants",
                  json={"principal": world["ids"]["bob"], "privileges": ["read", "write"]}))
    ok(alice.post(f"/api/memory/{mem}/legacy-root", json={}), 201)
    root = head_of(alice, mem, "refs/shared/main")
    props = {}
    for who, other in (("alice", bob), ("bob", alice)):
        client = world[who]
        ref = f"refs/agents/{world['mids'][who]}/main"
        ok(client.post(f"/api/memory/{mem}/branches",
                       json={"ref_name": ref, "head_changeset_id": root}), 201)
        ok(commit(client, mem, ref, f"race-{who}", f"{who} was here", root), 201)
        prop = ok(client.post(f"/api/memory/{mem}/proposals",
                              json={"source_ref": ref, "idempotency_key": f"race-{who}"}), 201)
        ok(other.post(f"/api/memory/proposals/{prop['proposal_id']}/reviews",
                      json={"verdict": "approve"}), 201)
        props[who] = prop["proposal_id"]
    # each proposal's reviewer merges it: bob merges alice's, alice merges bob's
    reqs = {"bob": ok(bob.post(f"/api/memory/proposals/{props['alice']}/authorize", json={})),
            "alice": ok(alice.post(f"/api/memory/proposals/{props['bob']}/authorize",
                                   json={}))}
    barrier = threading.Barrier(2)
    answers: dict[str, httpx.Response] = {}

    def run(who: str) -> None:
        with world["server"].client(world["tokens"][who]) as client:
            barrier.wait()
            answers[who] = client.post(f"/api/memory/{mem}/refs/merge", json=reqs[who])

    threads = [threading.Thread(target=run, args=(w,)) for w in reqs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    statuses = sorted(r.status_code for r in answers.values())
    assert statuses == [200, 409], {w: r.text for w, r in answers.items()}
    loser = next(w for w, r in answers.items() if r.status_code == 409)
    body = answers[loser].json()
    assert body["error"] == "cas-mismatch" and "re-read" in body["message"]
    advances = ok(alice.get(f"/api/memory/{mem}/changesets"))["changesets"]
    assert len(advances) == 2  # the root and the winner's changeset: nothing of the loser
    # The loser's nonce was not burnt, but its envelope is bound to the old head: a retry with
    # it is still refused (stale expected head), so the loser asks for a fresh authorization.
    retry = world[loser].post(f"/api/memory/{mem}/refs/merge", json=reqs[loser])
    assert retry.status_code == 409 and retry.json()["error"] == "cas-mismatch"
    fresh = ok(world[loser].post(f"/api/memory/proposals/{reqs[loser]['merge_proposal_id']}"
                                 "/authorize", json={}))
    assert fresh["strategy"] == "merge_commit"
    ok(world[loser].post(f"/api/memory/{mem}/refs/merge", json=fresh))


def test_every_write_route_takes_an_idempotency_key(world: dict[str, Any]) -> None:
    doc = ok(world["alice"].get("/openapi.json"))
    for path, item in doc["paths"].items():
        if not path.startswith("/api/memory"):
            continue
        for method, operation in item.items():
            if method in ("post", "put", "patch", "delete"):
                names = {p["name"] for p in operation.get("parameters", [])}
                assert "Idempotency-Key" in names, (path, method)
    # the header replays a write exactly: a review recorded twice is one review
    alice, bob, p = world["alice"], world["bob"], world["project"]
    mine = f"refs/agents/{world['mids']['alice']}/main"
    ok(commit(alice, p, mine, "hk1", "header keyed", head_of(alice, p, mine)), 201)
    prop = ok(alice.post(f"/api/memory/{p}/proposals",
                         json={"source_ref": mine, "idempotency_key": "hk-p"}), 201)
    url = f"/api/memory/proposals/{prop['proposal_id']}/reviews"
    first = ok(bob.post(url, json={"verdict": "approve"}, headers={"Idempotency-Key": "r1"}), 201)
    again = ok(bob.post(url, json={"verdict": "approve"}, headers={"Idempotency-Key": "r1"}), 201)
    assert again == first
    reviews = ok(bob.get(f"/api/memory/proposals/{prop['proposal_id']}"))["reviews"]
    assert [r["review_id"] for r in reviews] == [first["review_id"]]
    lethe_err(bob.post(url, json={"verdict": "reject"}, headers={"Idempotency-Key": "r1"}),
              409, "idempotency-mismatch")


def test_review_gate_does_not_reveal_unseen_memories(world: dict[str, Any]) -> None:
    alice, bob = world["alice"], world["bob"]
    hidden = ok(alice.post("/v1/memories", json={"name": "Hidden, reviewed"}))["id"]
    ok(alice.put(f"/api/memory/{hidden}/settings", json={"review_required": True}))
    unseen = bob.post(f"/v1/memories/{hidden}/records", json={"content": "probe"},
                      headers={"Idempotency-Key": "probe-1"})
    unknown = bob.post("/v1/memories/hmem_nosuchmemoryatall0000000000/records",
                       json={"content": "probe"}, headers={"Idempotency-Key": "probe-2"})
    assert unseen.status_code == unknown.status_code == 404
    assert unseen.json() == unknown.json()
