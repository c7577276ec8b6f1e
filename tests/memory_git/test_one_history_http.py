"""One history end to end over real HTTP (``pal serve``): an agent's reviewed commit is merged
by a person, becomes a record like any other, ``pal admin rebuild`` stays equal, and erasing
the merged record leaves none of its words in any file of the data directory while the
history still verifies and says "erased"."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

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
