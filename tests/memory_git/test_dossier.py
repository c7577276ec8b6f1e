"""What a reviewer reads, at the service (issue 15): the review queue and open counts across
the memories a caller can see, a proposal's dossier (staleness, conflicts, near-duplicates in
shared memory, every op's fields before and after, member types), the prime as it would be
after a pending merge, and grants with their holders named.

The prime preview is checked against the real thing: each scenario previews a merge, merges,
and compares the preview with the prime the service then serves, byte for byte. A standing
write that goes through review reaches the prime exactly as the same direct write does."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from palimpsest.errors import Conflict, Forbidden, NotFound
from palimpsest.service.memories import MemoryService
from palimpsest.service.memorygit import dossier
from palimpsest.service.memorygit.flow import ReviewFlow
from palimpsest.service.memorygit.mergeauth import KeyRing
from palimpsest.service.memorygit.projection import Projection
from palimpsest.service.memorygit.reviewed import ReviewedWrites
from palimpsest.service.memorygit.wiring import open_flow
from palimpsest.service.model import Caller, Changeset, Op
from tests.memory_git.test_one_history import World as HistoryWorld
from tests.memory_git.test_one_history import assert_rebuild_equal

STANDING = {"standing": True}


@dataclass
class World:
    svc: MemoryService
    flow: ReviewFlow
    alice: Caller  # a person holding every privilege on Team
    bob: Caller  # an agent with read and write; his writes go through review
    carol: Caller  # a person holding no grant at all
    mem: str
    data: Path

    @property
    def a(self) -> str:
        return f"member:{self.alice.member.id}"

    def pending_write(self, body: dict[str, Any], key: str) -> dict[str, Any]:
        out = self.svc.remember(self.bob, self.mem, body, idempotency_key=key)
        assert out["object"] == "memory.pending_review", out
        return out

    def merge(self, proposal_id: str) -> str:
        self.flow.review(self.a, proposal_id, {"verdict": "approve"})
        auth = self.flow.authorize(self.a, proposal_id, {})
        self.flow.merge(self.a, self.mem, auth)
        return str(auth["strategy"])


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    data = tmp_path / "data"
    with MemoryService(data) as svc:
        am, bm = svc.create_member("alice", "human"), svc.create_member("bob", "agent")
        cm = svc.create_member("carol", "human")
        alice, bob, carol = svc.caller(am.id), svc.caller(bm.id), svc.caller(cm.id)
        mem = svc.create_memory(alice, {"name": "Team"})["id"]
        svc.put_grant(alice, mem, {"principal": f"member:{bm.id}",
                                   "privileges": ["read", "write"]})
        flow = open_flow(svc, ring=KeyRing({"k": b"k" * 32}))
        ReviewedWrites(flow).put_settings(f"member:{am.id}", mem, {"review_required": True})
        yield World(svc, flow, alice, bob, carol, mem, data)


def _history(w: World) -> HistoryWorld:
    return HistoryWorld(w.svc, w.flow, w.alice, w.bob, w.a, f"member:{w.bob.member.id}", w.mem,
                        w.data)


# --- the prime after a pending merge ----------------------------------------------------------
def test_a_standing_write_through_review_reaches_the_prime_as_a_direct_write_does(
        world: World) -> None:
    w = world
    body = {"type": "procedure", "title": "Answer within a day",
            "content": "Answer support questions within one business day.",
            "attributes": STANDING}
    direct_mem = w.svc.create_memory(w.alice, {"name": "Direct"})["id"]
    direct = w.svc.remember(w.alice, direct_mem, body)
    assert w.svc.prime(w.alice, direct_mem, 4000)["records"] == [direct["id"]]

    pending = w.pending_write(body, "w1")
    rid = pending["memory_id"]
    assert rid not in w.svc.prime(w.alice, w.mem, 4000)["records"]  # not accepted yet
    preview = w.svc.prime_preview(w.alice, w.mem, 4000, pending["proposal_id"])
    assert preview["object"] == "memory.prime_preview"
    assert preview["now"] == w.svc.prime(w.alice, w.mem, 4000)
    assert preview["after"]["records"] == [rid]
    assert "Answer support questions within one business day." in preview["after"]["text"]

    assert w.merge(pending["proposal_id"]) == "fast_forward"
    assert w.svc.prime(w.alice, w.mem, 4000) == preview["after"]  # exactly what was previewed
    merged = w.svc.get_record(w.alice, w.mem, rid)
    assert merged["attributes"]["standing"] is True
    assert merged["attributes"]["tags"] == ["standing=true"]
    assert_rebuild_equal(_history(w))  # the history alone makes it standing


def test_a_write_without_standing_stays_out_of_the_prime_both_ways(world: World) -> None:
    w = world
    pending = w.pending_write({"content": "Lunch is at noon", "attributes": {"standing": False,
                                                                            "room": "A"}}, "w1")
    preview = w.svc.prime_preview(w.alice, w.mem, 4000, pending["proposal_id"])
    assert preview["after"]["records"] == []
    w.merge(pending["proposal_id"])
    merged = w.svc.get_record(w.alice, w.mem, pending["memory_id"])
    assert "standing" not in merged["attributes"]
    assert merged["attributes"]["tags"] == ["room=A", "standing=false"]
    assert w.svc.prime(w.alice, w.mem, 4000) == preview["after"]


def test_the_preview_drops_a_standing_record_the_merge_supersedes(world: World) -> None:
    w = world
    old = w.svc.remember(w.alice, w.mem, {"type": "fact", "content": "Standup at 10",
                                          "attributes": STANDING})
    kept = w.svc.remember(w.alice, w.mem, {"content": "Deploys on Tuesdays",
                                           "attributes": STANDING})
    h = _history(w)
    h.bob_commit("c1", {"op_type": "supersede_memory", "target_event_id": old["id"],
                        "payload": {"content": "Standup at 9:30", "memory_id": "standup"}},
                 {"op_type": "add_memory", "payload": {"content": "Retro on Fridays",
                                                       "tags": ["standing=true"]}})
    prop, _ = w.flow.propose(h.b, w.mem, {"source_ref": h.bob_ref, "idempotency_key": "p1"})
    preview = w.svc.prime_preview(w.alice, w.mem, 4000, prop["proposal_id"])
    assert preview["now"]["records"] == [old["id"], kept["id"]]
    after = preview["after"]["records"]
    assert after[0] == kept["id"] and len(after) == 2 and old["id"] not in after
    assert "Standup at 9:30" not in preview["after"]["text"]  # the successor is not standing
    w.merge(prop["proposal_id"])
    assert w.svc.prime(w.alice, w.mem, 4000) == preview["after"]


def test_the_preview_of_a_stale_proposal_is_the_merge_commits_prime(world: World) -> None:
    w = world
    pending = w.pending_write({"content": "Retro on Fridays", "attributes": STANDING}, "w1")
    later = w.svc.remember(w.alice, w.mem, {"content": "Standup at 10",
                                            "attributes": STANDING})
    found = w.svc.review_dossier(w.alice, pending["proposal_id"])
    assert found.stale_by == 1  # the target gained alice's write since the proposal opened
    assert [c["conflict_type"] for c in found.live_conflicts] == ["stale_base"]
    assert found.stored_conflicts == ()  # none when it opened
    preview = w.svc.prime_preview(w.alice, w.mem, 4000, pending["proposal_id"])
    assert preview["after"]["records"] == [later["id"], pending["memory_id"]]
    assert w.merge(pending["proposal_id"]) == "merge_commit"
    assert w.svc.prime(w.alice, w.mem, 4000) == preview["after"]


def test_a_tight_budget_and_a_cherry_pick_preview(world: World) -> None:
    w = world
    h = _history(w)
    cs = h.bob_commit("c1", {"op_type": "add_memory", "payload": {
        "content": "Picked", "tags": ["standing=true"]}},
        {"op_type": "add_memory", "payload": {"content": "Left behind",
                                              "tags": ["standing=true"]}})
    prop, _ = w.flow.propose(h.b, w.mem, {"source_ref": h.bob_ref, "idempotency_key": "p1",
                                          "selected_ops": [f"{cs['changeset_id']}:0"]})
    preview = w.svc.prime_preview(w.alice, w.mem, 4000, prop["proposal_id"])
    assert "Picked" in preview["after"]["text"]
    assert "Left behind" not in preview["after"]["text"]
    tight = w.svc.prime_preview(w.alice, w.mem, 10, prop["proposal_id"])
    assert tight["after"]["records"] == [] and tight["after"]["truncated"] is True
    assert w.merge(prop["proposal_id"]) == "cherry_pick"
    primed = w.svc.prime(w.alice, w.mem, 4000)
    # the pick derives a new record id (and the merger writes it); all else is as previewed
    [previewed], [real] = preview["after"]["records"], primed["records"]
    assert preview["after"]["text"].replace(previewed, real) == primed["text"]
    assert {**preview["after"], "text": "", "records": []} == {**primed, "text": "",
                                                                "records": []}


def test_a_preview_writes_nothing(world: World) -> None:
    w = world
    pending = w.pending_write({"content": "Retro on Fridays", "attributes": STANDING}, "w1")
    before = w.svc.rebuild()
    refs = w.svc.list_refs(w.alice, w.mem)
    w.svc.prime_preview(w.alice, w.mem, 4000, pending["proposal_id"])
    after = w.svc.rebuild()
    assert after["digest_after"] == before["digest_after"] and after["equal"] is True
    assert w.svc.list_refs(w.alice, w.mem) == refs
    with pytest.raises(NotFound):
        w.svc.get_record(w.alice, w.mem, pending["memory_id"])


def test_a_preview_refuses_closed_unseen_and_other_memories_proposals(world: World) -> None:
    w = world
    pending = w.pending_write({"content": "Retro on Fridays"}, "w1")
    other = w.svc.create_memory(w.alice, {"name": "Other"})["id"]
    with pytest.raises(NotFound) as wrong_memory:
        w.svc.prime_preview(w.alice, other, 4000, pending["proposal_id"])
    with pytest.raises(NotFound) as unknown:
        w.svc.prime_preview(w.alice, w.mem, 4000, "0190c0de-0000-7000-8000-000000000000")
    assert (wrong_memory.value.code, str(wrong_memory.value)) == (
        unknown.value.code, str(unknown.value)) == (
        "proposal-not-found", "no such proposal within your reach")
    with pytest.raises(NotFound) as unseen:  # carol cannot see Team at all
        w.svc.prime_preview(w.carol, w.mem, 4000, pending["proposal_id"])
    assert unseen.value.code == "memory_not_found"
    w.flow.review(w.a, pending["proposal_id"], {"verdict": "reject", "comment": "no"})
    with pytest.raises(Conflict) as closed:
        w.svc.prime_preview(w.alice, w.mem, 4000, pending["proposal_id"])
    assert closed.value.code == "proposal-closed"


# --- the queue, counts and the dossier --------------------------------------------------------
def test_queue_and_counts_cover_exactly_what_the_caller_may_read(world: World) -> None:
    w = world
    first = w.pending_write({"title": "Notice period", "content": "Notice is 60 days"}, "w1")
    erin = w.svc.caller(w.svc.create_member("erin", "agent").id)
    w.svc.put_grant(w.alice, w.mem, {"principal": f"member:{erin.member.id}",
                                     "privileges": ["read", "write"]})
    w.svc.remember(erin, w.mem, {"content": "Retro on Fridays"}, idempotency_key="w2")
    hidden = w.svc.create_memory(w.alice, {"name": "Board", "restricted": True})["id"]
    ReviewedWrites(w.flow).put_settings(w.a, hidden, {"review_required": True})
    queue = w.svc.review_queue(w.alice)
    assert [(m["id"], [p["summary"] for p in items]) for m, items in queue] == [
        (w.mem, ["Retro on Fridays", "Notice period"])]  # newest first; Board has none
    assert w.svc.open_proposal_counts(w.alice, [w.mem, hidden]) == {w.mem: 2, hidden: 0}
    assert w.svc.open_proposal_counts(w.bob, [w.mem, hidden]) == {w.mem: 2}
    w.pending_write({"content": "and by letter"}, "w3")  # bob's branch: one proposal again
    assert [p["summary"] for p in w.svc.review_queue(w.bob)[0][1]] == [
        "Notice period", "Retro on Fridays"]  # a proposal is known by its first op's words
    first = w.svc.review_queue(w.bob)[0][1][0]
    assert w.svc.review_queue(w.carol) == []
    assert w.svc.open_proposal_counts(w.carol, [w.mem, hidden]) == {}
    w.flow.review(w.a, first["proposal_id"], {"verdict": "reject", "comment": "no"})
    assert w.svc.open_proposal_counts(w.alice, [w.mem]) == {w.mem: 1}
    every = w.svc.list_proposals(w.alice, w.mem)
    assert [(p["status"], p["summary"]) for p in every] == [
        ("rejected", "Notice period"), ("open", "Retro on Fridays"),
        ("canceled", "Notice period")]
    with pytest.raises(NotFound):
        w.svc.list_proposals(w.carol, w.mem)


def test_the_dossier_of_a_correction(world: World) -> None:
    w = world
    fact = w.svc.remember(w.alice, w.mem, {"type": "fact", "title": "Renewal",
                                           "content": "Acme renews every March"})
    w.svc.remember(w.alice, w.mem, {"content": "Acme renews its contract every March too"})
    h = _history(w)
    h.bob_commit("c1", {"op_type": "correct_memory", "target_event_id": fact["id"],
                        "payload": {"content": "Acme renews every April", "kind": "fact"}})
    prop, _ = w.flow.propose(h.b, w.mem, {"source_ref": h.bob_ref, "idempotency_key": "p1",
                                          "message": "April, not March"})
    found = w.svc.review_dossier(w.alice, prop["proposal_id"])
    assert found.proposal["summary"] == "Acme renews every April"
    assert found.proposal["message"] == "April, not March"
    assert found.stale_by == 0 and found.target_head == h.shared_head()
    assert found.member_types == {h.b: "agent"}  # the originator and author; no review yet
    [changeset] = found.changesets
    [op] = changeset.ops
    assert (op.op_type, op.target, op.target_known) == ("correct_memory", fact["id"], True)
    assert [(f.name, f.before, f.after) for f in op.fields] == [
        ("content", "Acme renews every March", "Acme renews every April"),
        ("kind", None, "fact")]
    # the other record shares the words; the corrected record itself is not its duplicate
    dup_ids = [d.record["id"] for d in found.duplicates]
    assert fact["id"] not in dup_ids and len(dup_ids) == 1
    assert found.duplicates[0].op == f"{changeset.changeset_id}:0"
    assert found.live_conflicts == () and found.stored_conflicts == ()


def test_the_dossier_is_hidden_like_an_unknown_proposal(world: World) -> None:
    w = world
    pending = w.pending_write({"content": "Retro on Fridays"}, "w1")
    found = w.svc.review_dossier(w.bob, pending["proposal_id"])
    assert found.member_types == {f"member:{w.bob.member.id}": "agent"}
    with pytest.raises(NotFound) as unseen:
        w.svc.review_dossier(w.carol, pending["proposal_id"])
    with pytest.raises(NotFound) as unknown:
        w.svc.review_dossier(w.alice, "0190c0de-0000-7000-8000-000000000000")
    assert (unseen.value.code, str(unseen.value)) == (unknown.value.code, str(unknown.value))


def test_changes_show_an_erased_op_and_replay_earlier_ops() -> None:
    cs = Changeset("c1", "m", "refs/agents/x/main", (), "member:x", "", "2026-01-01T00:00:00Z",
                   "k", (Op("add_memory", None, {"content": "one", "kind": "fact"}, "r1"),
                         Op("correct_memory", "r1", {"content": "two"}, "r2"),
                         Op("add_memory", None, None, "r3")))
    [view] = dossier.changes(Projection("m"), [cs], lambda mid, rid: None)
    first, second, erased = view.ops
    assert [(f.name, f.before) for f in first.fields] == [("content", None), ("kind", None)]
    assert [(f.name, f.before, f.after) for f in second.fields] == [("content", "one", "two")]
    assert second.target_known and not first.target_known
    assert erased.erased and erased.fields == ()
    assert dossier.summary([cs]) == "one"


# --- grants with their holders ----------------------------------------------------------------
def test_grant_holders_name_members_for_holders_of_delete_only(world: World) -> None:
    w = world
    listed = w.svc.grant_holders(w.alice, w.mem)["data"]
    holders = {g["principal"]: g["holder"] for g in listed}
    assert holders[f"member:{w.bob.member.id}"] == {"name": "bob", "type": "agent"}
    assert holders[f"member:{w.alice.member.id}"] == {"name": "alice", "type": "human"}
    plain = w.svc.list_grants(w.alice, w.mem)["data"]
    assert [{k: v for k, v in g.items() if k != "holder"} for g in listed] == plain
    with pytest.raises(Forbidden) as refused:
        w.svc.grant_holders(w.bob, w.mem)
    assert refused.value.code == "memory_forbidden" and "delete" in str(refused.value)
    with pytest.raises(NotFound):
        w.svc.grant_holders(w.carol, w.mem)
