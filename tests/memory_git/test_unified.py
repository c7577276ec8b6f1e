"""One history, in process: Memory Git merges become UHP records, and ``rebuild`` re-derives
the same records from the changesets (Memory Git ops included)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from palimpsest.service.gitsetup import open_flow
from palimpsest.service.memories import MemoryService
from palimpsest.service.mergeauth import KeyRing


def test_merge_projects_records_and_rebuild_reproduces_them(tmp_path: Path) -> None:
    with MemoryService(tmp_path / "data") as svc:
        alice_m = svc.create_member("alice", "human")
        bob_m = svc.create_member("bob", "agent")
        alice, bob = svc.caller(alice_m.id), svc.caller(bob_m.id)
        mem = svc.create_memory(alice, {"name": "Team"})["id"]
        svc.put_grant(alice, mem, {"principal": f"member:{bob_m.id}",
                                   "privileges": ["read", "write"]})
        first = svc.remember(alice, mem, {"type": "fact", "content": "Standup at 10"})
        flow = open_flow(svc, ring=KeyRing({"k": b"k" * 32}))
        a, b = f"member:{alice_m.id}", f"member:{bob_m.id}"
        head = flow.git.get_ref(b, mem, "refs/shared/main")["head_changeset_id"]
        ref = f"refs/agents/{bob_m.id}/main"
        flow.git.create_branch(b, mem, {"ref_name": ref, "head_changeset_id": head})
        cs, _ = flow.git.create_changeset(b, {
            "project_id": mem, "ref_name": ref, "expected_head": head, "idempotency_key": "k1",
            "ops": [{"op_type": "supersede_memory", "target_event_id": first["id"],
                     "payload": {"content": "Standup at 9:30", "kind": "fact"}},
                    {"op_type": "add_memory", "payload": {"content": "Retro on Fridays",
                                                          "tags": ["ritual"]}}]})
        prop, _ = flow.propose(b, mem, {"source_ref": ref, "idempotency_key": "p1"})
        flow.review(a, prop["proposal_id"], {"verdict": "approve"})
        flow.merge(a, mem, flow.authorize(a, prop["proposal_id"], {}))

        def records() -> Any:
            listed = svc.list_records(alice, mem, include="all")["data"]
            return sorted(((r["id"], r["status"], r["content"][0]["text"], r["type"])
                           for r in listed), key=str)

        before = records()
        ids = [op["resulting_event_id"] for op in cs["ops"]]
        assert before == sorted([
            (first["id"], "forgotten", "Standup at 10", "fact"),
            (ids[0], "active", "Standup at 9:30", "fact"),
            (ids[1], "active", "Retro on Fridays", "note"),
        ], key=str)
        report = svc.rebuild()
        assert report["verified"] == 2  # the UHP write and the fast-forwarded changeset
        assert records() == before
        found = svc.recall(bob, mem, {"text": "retro"})["results"]
        assert [r["record"]["id"] for r in found] == [ids[1]]
