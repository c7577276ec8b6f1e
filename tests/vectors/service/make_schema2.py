"""How ``schema2.sql`` was made: a data directory written by the store of schema 2 (commit
``9b74a6e``), dumped as SQL less the search index. Run it against that version only, e.g.
``git archive 9b74a6e | tar -x -C /tmp/old && PYTHONPATH=/tmp/old/src python
tests/vectors/service/make_schema2.py tests/vectors/service/schema2.sql``; the tests never
run it (the fixture is a copy, never regenerated)."""

import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path

from palimpsest.service.memories import MemoryService
from palimpsest.service.memorygit.mergeauth import KeyRing
from palimpsest.service.memorygit.wiring import open_flow


def add(content: str, **payload: object) -> dict[str, object]:
    return {"op_type": "add_memory", "payload": {"content": content, **payload}}


def main(out: Path) -> None:
    data = Path(tempfile.mkdtemp()) / "data"
    with MemoryService(data) as svc:
        am, bm = svc.create_member("alice", "human"), svc.create_member("bob", "agent")
        alice, bob = svc.caller(am.id), svc.caller(bm.id)
        mem = svc.create_memory(alice, {"name": "Team"})["id"]
        child = svc.create_memory(alice, {"name": "Ops", "parent_id": mem})["id"]
        svc.put_grant(alice, mem, {"principal": f"member:{bm.id}",
                                   "privileges": ["read", "write"]})
        r1 = svc.remember(alice, mem, {"type": "fact", "content": "Standup at 10"},
                          idempotency_key="r1")
        svc.revise(alice, mem, r1["id"], {"content": "Standup at 10:15", "reason": "moved"})
        gone = svc.remember(alice, mem, {"content": "to forget"})
        svc.forget(alice, mem, gone["id"])
        erased = svc.remember(alice, mem, {"content": "Zyxwquartz erased words"})
        svc.erase(alice, mem, {"record_ids": [erased["id"]]})
        for n, text in enumerate(("What time is standup?", "It is at ten fifteen")):
            svc.remember(alice, mem, {"type": "episode", "content": text,
                                      "attributes": {"session_id": "s1"}},
                         idempotency_key=f"e{n + 1}")
        svc.remember(bob, child, {"content": "Deploys on Wednesdays",
                                  "references": [{"rel": "about", "record_id": r1["id"]}]})
        svc.create_snapshot(alice, mem, {"name": "before review"})
        flow = open_flow(svc, ring=KeyRing({"k": b"k" * 32}))
        a, b = f"member:{am.id}", f"member:{bm.id}"
        head = flow.git.get_ref(b, mem, "refs/shared/main")["head_changeset_id"]
        ref = f"refs/agents/{bm.id}/main"
        flow.git.create_branch(b, mem, {"ref_name": ref, "head_changeset_id": head})

        def commit(key: str, after: str, *ops: dict[str, object]) -> str:
            cs, _ = flow.git.create_changeset(b, {
                "project_id": mem, "ref_name": ref, "expected_head": after,
                "idempotency_key": key, "message": f"commit {key}", "ops": list(ops)})
            return str(cs["changeset_id"])

        c1 = commit("k1", head,
                    add("Retro on Fridays", kind="fact", summary="retro day", tags=["ritual"],
                        memory_id="retro"),
                    add("Bins go out Tuesday", memory_id="bins"),
                    {"op_type": "supersede_memory", "target_event_id": r1["id"],
                     "payload": {"content": "Standup at 9:30", "kind": "fact",
                                 "memory_id": "standup"}})
        c2 = commit("k2", c1,
                    {"op_type": "add_relationship",
                     "payload": {"kind": "about", "from_memory_id": "retro",
                                 "to_memory_id": "standup"}},
                    {"op_type": "attach_evidence", "target_event_id": "retro",
                     "payload": {"kind": "calendar", "source": "team calendar"}},
                    {"op_type": "correct_memory", "target_event_id": "bins",
                     "resulting_event_id": "bins2",
                     "payload": {"content": "Bins go out Wednesday"}})
        prop, _ = flow.propose(b, mem, {"source_ref": ref, "idempotency_key": "p1"})
        flow.review(a, prop["proposal_id"], {"verdict": "approve"})
        flow.merge(a, mem, flow.authorize(a, prop["proposal_id"], {}))
        commit("k3", c2, add("Lunch is at noon"))  # work left under review
        flow.propose(b, mem, {"source_ref": ref, "idempotency_key": "p2"})
        assert svc.rebuild()["equal"] is True
    db = sqlite3.connect(data / "palimpsest.db")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    lines = ["-- a data directory of the store of schema 2 (one history, commit 9b74a6e), made by",
             "-- tests/vectors/service/make_schema2.py (sqlite3 iterdump; the search index left",
             "-- out: the migration re-derives every projection)"]
    lines += [line for line in db.iterdump()
              if "record_fts" not in line and "record_vocab" not in line]
    db.close()
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    shutil.rmtree(data.parent)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
