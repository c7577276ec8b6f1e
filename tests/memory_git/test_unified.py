"""One history, in process: Memory Git merges become UHP records, and ``rebuild`` re-derives
the same records from the changesets (Memory Git ops included)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from palimpsest.service.memories import MemoryService
from palimpsest.service.memorygit.mergeauth import KeyRing
from palimpsest.service.memorygit.wiring import open_flow


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
                     "payload": {"content": "Standup at 9:30", "kind": "fact",
                                 "memory_id": "standup"}},
                    {"op_type": "add_memory", "payload": {"content": "Retro on Fridays",
                                                          "tags": ["ritual"]}}]})
        retro = cs["ops"][1]["resulting_event_id"]
        head = cs["changeset_id"]
        cs2, _ = flow.git.create_changeset(b, {
            "project_id": mem, "ref_name": ref, "expected_head": head, "idempotency_key": "k2",
            "ops": [{"op_type": "add_relationship",
                     "payload": {"kind": "about", "from_memory_id": retro,
                                 "to_memory_id": "standup"}},
                    {"op_type": "attach_evidence", "target_event_id": retro,
                     "payload": {"kind": "calendar", "source": "team calendar"}},
                    {"op_type": "propose_deprecation", "target_event_id": "standup",
                     "payload": {"reason": "moving to async updates"}}]})
        prop, _ = flow.propose(b, mem, {"source_ref": ref, "idempotency_key": "p1"})
        flow.review(a, prop["proposal_id"], {"verdict": "approve"})
        flow.merge(a, mem, flow.authorize(a, prop["proposal_id"], {}))

        def records() -> Any:
            listed = svc.list_records(alice, mem, include="all")["data"]
            return sorted(((r["id"], r["status"], r["content"][0]["text"], r["type"],
                            r["version"]) for r in listed), key=str)

        before = records()
        assert before == sorted([
            (first["id"], "forgotten", "Standup at 10", "fact", 1),
            ("standup", "active", "Standup at 9:30", "fact", 2),
            (retro, "active", "Retro on Fridays", "note", 3),
        ], key=str)
        got = svc.get_record(alice, mem, retro)
        assert [(r["rel"], r["record_id"]) for r in got["references"]] == [("about", "standup")]
        assert got["attributes"]["evidence"] == [{"kind": "calendar",
                                                  "source": "team calendar"}]
        standup = svc.get_record(alice, mem, "standup")
        assert standup["attributes"]["deprecation_proposed"] == "moving to async updates"
        graph = svc.graph(alice, mem, {"around": retro, "hops": 1})
        assert {e["to"]["record_id"] for e in graph["edges"]} >= {"standup"}
        report = svc.rebuild()
        assert report["verified"] == 3  # the UHP write and the two fast-forwarded changesets
        assert cs2["changeset_id"] != head
        assert records() == before
        found = svc.recall(bob, mem, {"text": "retro"})["results"]
        assert [r["record"]["id"] for r in found] == [retro]
