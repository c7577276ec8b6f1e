"""One history end to end over real HTTP (``pal serve``): an agent's reviewed commit is merged
by a person, becomes a record like any other, ``pal admin rebuild`` stays equal, and erasing
the merged record leaves none of its words in any file of the data directory while the
history still verifies and says "erased"."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from tests.api.server import ok, pal_command, provision, start
from tests.stored import grep_data_dir

SECRET = "Zorblatt keeps the spare key under the Quimby stone"


def rebuild(data_dir: Path) -> dict[str, object]:
    out = subprocess.run([*pal_command("admin", "--data-dir", str(data_dir), "rebuild",
                                       "--json")], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    report: dict[str, object] = json.loads(out.stdout)
    return report


def test_merge_then_erase_over_http(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    members = provision(data_dir, (("alice", "human"), ("bob", "agent")))
    server = start(data_dir, env={"PAL_MERGE_HMAC_KEY": "m" * 40})
    try:
        alice = server.client(members["alice"].token)
        bob = server.client(members["bob"].token)
        mem = ok(alice.post("/v1/memories", json={"name": "Household"}))["id"]
        ok(alice.post(f"/v1/memories/{mem}/grants",
                      json={"principal": f"member:{members['bob'].id}",
                            "privileges": ["read", "write"]}))
        ok(alice.post(f"/api/memory/{mem}/legacy-root", json={}), 201)
        root = ok(alice.get(f"/api/memory/{mem}/refs/shared/main"))["head_changeset_id"]
        ref = f"refs/agents/{members['bob'].id}/main"
        ok(bob.post(f"/api/memory/{mem}/branches",
                    json={"ref_name": ref, "head_changeset_id": root}), 201)
        cs = ok(bob.post("/api/memory/changesets", headers={"Idempotency-Key": "c1"}, json={
            "project_id": mem, "ref_name": ref, "expected_head": root, "idempotency_key": "c1",
            "ops": [{"op_type": "add_memory", "payload": {"content": SECRET, "kind": "fact"}},
                    {"op_type": "add_memory", "payload": {"content": "bins go out Tuesday"}}]}),
            201)
        prop = ok(bob.post(f"/api/memory/{mem}/proposals",
                           json={"source_ref": ref, "idempotency_key": "p1"}), 201)
        ok(alice.post(f"/api/memory/proposals/{prop['proposal_id']}/reviews",
                      json={"verdict": "approve"}), 201)
        auth = ok(alice.post(f"/api/memory/proposals/{prop['proposal_id']}/authorize",
                             json={}))
        ok(alice.post(f"/api/memory/{mem}/refs/merge", json=auth))

        secret_id = cs["ops"][0]["resulting_event_id"]
        record = ok(alice.get(f"/v1/memories/{mem}/records/{secret_id}"))
        assert secret_id.startswith("hrec_")
        assert record["written_by"] == {"kind": "member", "id": members["bob"].id,
                                        "type": "agent"}
        assert ok(alice.post(f"/v1/memories/{mem}/recall", json={"text": "Zorblatt"}))[
            "results"][0]["record"]["id"] == secret_id
        assert grep_data_dir(data_dir, "Zorblatt", "Quimby")  # the merge wrote them
        first = rebuild(data_dir)  # while the server runs (WAL)
        assert first["equal"] is True and first["written"] is False

        erased = ok(alice.post(f"/v1/memories/{mem}/erase", json={"record_ids": [secret_id]}))
        assert erased == {"object": "memory.erasure", "erased": [secret_id], "unreachable": []}
        shown = ok(alice.get(f"/api/memory/changesets/{cs['changeset_id']}"))
        assert shown["integrity_digest"] == cs["changeset_id"]
        assert shown["ops"][0]["erased"] is True and "payload" not in shown["ops"][0]
        assert shown["ops"][1]["payload"]["content"] == "bins go out Tuesday"
        context = ok(bob.get(f"/api/memory/{mem}/context"))
        assert [m["content"] for m in context["memories"]] == ["bins go out Tuesday"]
        assert ok(alice.post(f"/v1/memories/{mem}/recall",
                             json={"text": "Zorblatt"}))["results"] == []
        assert rebuild(data_dir)["equal"] is True
    finally:
        server.stop()
    assert grep_data_dir(data_dir, "Zorblatt", "Quimby") == []


WORDS = ("Zorblatt", "Quimby", "Brackwater")  # none of them anywhere but in the erased record


def _clean(resp: Any, where: str) -> Any:
    """The body of an answer that must carry none of the erased words."""
    assert not any(w in resp.text for w in WORDS), (where, resp.text[:400])
    return resp.json()


def test_an_erased_merged_record_is_gone_from_every_route(tmp_path: Path) -> None:
    """A merged record — standing, with evidence and a relationship, its words also in a
    proposal still open — is erased; then no UHP or Memory Git route answers any of its
    words, by-id reads of it answer as for an unknown id, reads pinned to a head before the
    erase say "erased", ``unreachable`` is empty and true, and no file holds the words."""
    data_dir = tmp_path / "data"
    members = provision(data_dir, (("alice", "human"), ("bob", "agent")))
    server = start(data_dir, env={"PAL_MERGE_HMAC_KEY": "m" * 40})
    try:
        alice = server.client(members["alice"].token)
        bob = server.client(members["bob"].token)
        mem = ok(alice.post("/v1/memories", json={"name": "Household"}))["id"]
        ok(alice.post(f"/v1/memories/{mem}/grants",
                      json={"principal": f"member:{members['bob'].id}",
                            "privileges": ["read", "write"]}))
        ok(alice.post(f"/api/memory/{mem}/legacy-root", json={}), 201)
        root = ok(alice.get(f"/api/memory/{mem}/refs/shared/main"))["head_changeset_id"]
        ref = f"refs/agents/{members['bob'].id}/main"
        ok(bob.post(f"/api/memory/{mem}/branches",
                    json={"ref_name": ref, "head_changeset_id": root}), 201)

        def commit(key: str, head: str, *ops: dict[str, Any]) -> dict[str, Any]:
            made: dict[str, Any] = ok(bob.post("/api/memory/changesets", json={
                "project_id": mem, "ref_name": ref, "expected_head": head,
                "idempotency_key": key, "ops": list(ops)}), 201)
            return made

        def merge(key: str) -> str:
            prop = ok(bob.post(f"/api/memory/{mem}/proposals",
                               json={"source_ref": ref, "idempotency_key": key}), 201)
            pid = prop["proposal_id"]
            ok(alice.post(f"/api/memory/proposals/{pid}/reviews", json={"verdict": "approve"}),
               201)
            auth = ok(alice.post(f"/api/memory/proposals/{pid}/authorize", json={}))
            ok(alice.post(f"/api/memory/{mem}/refs/merge", json=auth))
            return str(pid)

        cs1 = commit("c1", root,
                     {"op_type": "add_memory", "resulting_event_id": "spare-key",
                      "payload": {"content": SECRET, "kind": "fact", "summary": "Zorblatt key",
                                  "tags": ["standing=true"]}},
                     {"op_type": "add_memory", "resulting_event_id": "bins",
                      "payload": {"content": "bins go out Tuesday"}})
        cs2 = commit("c2", cs1["changeset_id"],
                     {"op_type": "attach_evidence", "target_event_id": "spare-key",
                      "payload": {"kind": "note", "note": "seen by Brackwater"}},
                     {"op_type": "add_relationship", "payload": {
                         "from_memory_id": "spare-key", "to_memory_id": "bins",
                         "kind": "near"}})
        merged = merge("p1")
        head = ok(alice.get(f"/api/memory/{mem}/refs/shared/main"))["head_changeset_id"]
        manifest = ok(alice.post(f"/api/memory/{mem}/context",
                                 json={"create_manifest": True}))["manifest_id"]
        # a proposal still open whose op names the record and quotes its words
        cs3 = commit("c3", cs2["changeset_id"],
                     {"op_type": "attach_verification", "target_event_id": "spare-key",
                      "payload": {"kind": "call", "note": "Quimby stone checked"}})
        pending = ok(bob.post(f"/api/memory/{mem}/proposals",
                              json={"source_ref": ref, "idempotency_key": "p2"}), 201)
        got = ok(alice.get(f"/v1/memories/{mem}/records/spare-key"))
        assert got["content"][0]["text"] == SECRET and got["version"] == 3
        assert "Zorblatt" in alice.get(f"/v1/memories/{mem}/prime").text  # it stood
        assert grep_data_dir(data_dir, *WORDS)  # the scenario did write them
        as_of = max(v["time"]["written_at"] for v in ok(alice.get(  # before the erase
            f"/v1/memories/{mem}/records/spare-key/history"))["data"])

        erased = ok(alice.post(f"/v1/memories/{mem}/erase",
                               json={"record_ids": ["spare-key", "hrec_unknown"]}))
        assert erased == {"object": "memory.erasure", "erased": ["spare-key"],
                          "unreachable": ["hrec_unknown"]}

        # UHP: by id as for an unknown id; nothing lists, recalls, primes or links it
        unknown = alice.get(f"/v1/memories/{mem}/records/hrec_aaaaaaaaaaaaaaaaaaaaaaaaaa")
        for path in (f"/v1/memories/{mem}/records/spare-key",
                     f"/v1/memories/{mem}/records/spare-key/history",
                     f"/v1/memories/{mem}/records/spare-key/content/0"):
            resp = alice.get(path)
            assert resp.status_code == unknown.status_code == 404, (path, resp.text)
            assert _clean(resp, path)["error"]["code"] == unknown.json()["error"]["code"]
        listed = _clean(alice.get(f"/v1/memories/{mem}/records", params={"include": "all"}),
                        "list")["data"]
        assert [r["id"] for r in listed] == ["bins"]
        for body in ({"text": "Zorblatt", "include": "all"}, {"query": "spare key Quimby"},
                     {"text": "Zorblatt", "as_of": as_of, "include": "all"}):
            assert _clean(alice.post(f"/v1/memories/{mem}/recall", json=body),
                          "recall")["results"] == [], body
        _clean(alice.get(f"/v1/memories/{mem}/prime"), "prime")
        graph = _clean(alice.post(f"/v1/memories/{mem}/graph", json={}), "graph")
        assert "spare-key" not in str(graph)

        # Memory Git: the changesets keep the digests and say "erased" where the words were
        for cs in (cs1, cs2, cs3):
            shown = _clean(alice.get(f"/api/memory/changesets/{cs['changeset_id']}"), "cs")
            assert shown["integrity_digest"] == cs["changeset_id"]
            _clean(alice.post(f"/api/memory/changesets/{cs['changeset_id']}/diff", json={}),
                   "diff")
        shown = alice.get(f"/api/memory/changesets/{cs1['changeset_id']}").json()
        assert shown["ops"][0]["erased"] is True and "payload" not in shown["ops"][0]
        assert shown["ops"][1]["payload"]["content"] == "bins go out Tuesday"
        for who, name in ((alice, "refs/shared/main"), (bob, ref)):  # his ref is his own
            _clean(who.get(f"/api/memory/{mem}/changesets", params={"ref": name}), "log")
            context = _clean(who.post(f"/api/memory/{mem}/context", json={"ref_name": name}),
                             "context")
            assert [m["memory_id"] for m in context["memories"]] == ["bins"], name
        pinned = _clean(alice.post(f"/api/memory/{mem}/context",
                                   json={"head_changeset_id": head}), "pinned context")
        assert [m["memory_id"] for m in pinned["memories"]] == ["bins"]
        _clean(alice.get(f"/api/memory/manifests/{manifest}"), "manifest")
        for pid in (merged, pending["proposal_id"]):
            _clean(alice.get(f"/api/memory/proposals/{pid}"), "proposal")
        _clean(alice.get(f"/api/memory/{mem}/proposals"), "proposals")
        _clean(alice.get(f"/api/memory/{mem}/conflicts"), "conflicts")
        _clean(alice.post(f"/api/memory/{mem}/conflicts/detect", json={
            "base_changeset_id": root, "left_changeset_id": head,
            "right_changeset_id": cs3["changeset_id"]}), "detect")
        # the open proposal still merges; the erased record stays erased
        pid = pending["proposal_id"]
        ok(alice.post(f"/api/memory/proposals/{pid}/reviews", json={"verdict": "approve"}), 201)
        auth = ok(alice.post(f"/api/memory/proposals/{pid}/authorize", json={}))
        ok(alice.post(f"/api/memory/{mem}/refs/merge", json=auth))
        assert alice.get(f"/v1/memories/{mem}/records/spare-key").status_code == 404
        assert rebuild(data_dir)["equal"] is True
    finally:
        server.stop()
    assert grep_data_dir(data_dir, *WORDS) == []
