"""One history, as the specification states it (issue 12): ``rebuild`` is equal on every store
the service can produce, merged records are made by the same projection as direct writes, and
erase is true for merged records too.

Each scenario drives the facade and the review flow in process over the real SQLite store; the
data directory is then read as bytes (every file, WAL included) where erase promises that the
text is gone."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from palimpsest.errors import NotFound
from palimpsest.service.memories import MemoryService
from palimpsest.service.memorygit.flow import ReviewFlow
from palimpsest.service.memorygit.mergeauth import KeyRing
from palimpsest.service.memorygit.reviewed import ReviewedWrites
from palimpsest.service.memorygit.wiring import open_flow
from palimpsest.service.model import Caller
from palimpsest.service.storage.records import record_key
from tests.stored import grep_data_dir

SECRET = "Quokkafern lives at Wexhollow Lane"  # words no analyser or fixture produces elsewhere


@dataclass
class World:
    svc: MemoryService
    flow: ReviewFlow
    alice: Caller  # a person holding every privilege
    bob: Caller  # an agent with read and write
    a: str
    b: str
    mem: str
    data: Path

    @property
    def bob_ref(self) -> str:
        return f"refs/agents/{self.bob.member.id}/main"

    def shared_head(self) -> str | None:
        head: str | None = self.flow.git.get_ref(self.a, self.mem,
                                                 "refs/shared/main")["head_changeset_id"]
        return head

    def bob_commit(self, key: str, *ops: dict[str, Any]) -> dict[str, Any]:
        git = self.flow.git
        if git.store.ref(self.mem, self.bob_ref) is None:
            git.create_branch(self.b, self.mem, {"ref_name": self.bob_ref,
                                                 "head_changeset_id": self.shared_head()})
        head = git.get_ref(self.b, self.mem, self.bob_ref)["head_changeset_id"]
        cs, _ = git.create_changeset(self.b, {
            "project_id": self.mem, "ref_name": self.bob_ref, "expected_head": head,
            "idempotency_key": key, "ops": list(ops)})
        return cs

    def merge(self, key: str, selected: list[str] | None = None) -> str:
        """Bob proposes his branch, Alice approves and merges; returns the strategy used."""
        body: dict[str, Any] = {"source_ref": self.bob_ref, "idempotency_key": key}
        if selected:
            body["selected_ops"] = selected
        prop, _ = self.flow.propose(self.b, self.mem, body)
        self.flow.review(self.a, prop["proposal_id"], {"verdict": "approve"})
        auth = self.flow.authorize(self.a, prop["proposal_id"], {})
        self.flow.merge(self.a, self.mem, auth)
        return str(auth["strategy"])


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    data = tmp_path / "data"
    with MemoryService(data) as svc:
        am = svc.create_member("alice", "human")
        bm = svc.create_member("bob", "agent")
        alice, bob = svc.caller(am.id), svc.caller(bm.id)
        mem = svc.create_memory(alice, {"name": "Team"})["id"]
        svc.put_grant(alice, mem, {"principal": f"member:{bm.id}",
                                   "privileges": ["read", "write"]})
        flow = open_flow(svc, ring=KeyRing({"k": b"k" * 32}))
        flow.git.init(f"member:{am.id}", mem)
        yield World(svc, flow, alice, bob, f"member:{am.id}", f"member:{bm.id}", mem, data)


def add(content: str, **payload: Any) -> dict[str, Any]:
    return {"op_type": "add_memory", "payload": {"content": content, **payload}}


def assert_rebuild_equal(w: World) -> dict[str, Any]:
    """``rebuild`` twice: equal both times, one digest, and nothing new in the store."""
    first = w.svc.rebuild()
    assert first["equal"] is True, first
    assert first["digest_before"] == first["digest_after"]
    rows = table_counts(w.data)
    second = w.svc.rebuild()
    assert second["equal"] is True, second
    assert second["digest_after"] == first["digest_after"]
    assert table_counts(w.data) == rows  # a rebuild of an equal store adds no row anywhere
    return first


def table_counts(data: Path) -> dict[str, int]:
    db = sqlite3.connect(data / "palimpsest.db")
    try:
        names = [r[0] for r in db.execute(
            "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'record_fts%' "
            "AND name NOT LIKE 'sqlite_%'")]
        return {n: db.execute(f'SELECT COUNT(*) FROM "{n}"').fetchone()[0]  # noqa: S608
                for n in names}
    finally:
        db.close()


def stored_texts(w: World, *needles: str) -> list[str]:
    """:func:`grep_data_dir` over the world's data directory, its WAL folded in first."""
    w.svc._store.compact_after_erase()
    return grep_data_dir(w.data, *needles)


# --- rebuild equality after every kind of write ----------------------------------------------
def test_rebuild_equal_after_fast_forward_merge(world: World) -> None:
    world.bob_commit("c1", add("Standup moves to 9:30", kind="fact", memory_id="standup"))
    assert world.merge("p1") == "fast_forward"
    assert_rebuild_equal(world)


def test_rebuild_equal_after_merge_commit(world: World) -> None:
    world.bob_commit("c1", add("Retro on Fridays", tags=["ritual"]))
    # accepted memory moves on meanwhile, so the branch no longer descends from it
    world.svc.remember(world.alice, world.mem, {"type": "fact", "content": "Office closed Monday"})
    assert world.merge("p1") == "merge_commit"
    assert_rebuild_equal(world)


def test_rebuild_equal_after_cherry_pick(world: World) -> None:
    cs = world.bob_commit("c1", add("Pick me", memory_id="pick"), add("Leave me"))
    assert world.merge("p1", selected=[f"{cs['changeset_id']}:0"]) == "cherry_pick"
    assert_rebuild_equal(world)
    listed = world.svc.list_records(world.alice, world.mem)["data"]
    assert [r["content"][0]["text"] for r in listed] == ["Pick me"]


def test_rebuild_equal_after_every_op_kind_revise_forget_erase_and_move(world: World) -> None:
    first = world.svc.remember(world.alice, world.mem, {"type": "fact", "content": "Standup at 10"})
    world.bob_commit(
        "c1",
        {"op_type": "supersede_memory", "target_event_id": first["id"],
         "payload": {"content": "Standup at 9:30", "kind": "fact", "memory_id": "standup"}},
        add("Retro on Fridays", memory_id="retro"))
    world.bob_commit(
        "c2",
        {"op_type": "add_relationship",
         "payload": {"kind": "about", "from_memory_id": "retro", "to_memory_id": "standup"}},
        {"op_type": "attach_evidence", "target_event_id": "retro",
         "payload": {"kind": "calendar", "source": "team calendar"}},
        {"op_type": "propose_deprecation", "target_event_id": "standup",
         "payload": {"reason": "moving to async updates"}},
        {"op_type": "correct_memory", "target_event_id": "retro", "resulting_event_id": "retro2",
         "payload": {"content": "Retro on Thursdays"}})
    world.bob_commit("c3", add("Duplicate retro", memory_id="dup"),
                     {"op_type": "mark_duplicate",
                      "payload": {"duplicate_id": "dup", "duplicate_of": "retro2"}})
    world.merge("p1")
    note = world.svc.remember(world.alice, world.mem, {"content": "to be revised"})
    world.svc.revise(world.alice, world.mem, note["id"], {"content": "revised"})
    gone = world.svc.remember(world.alice, world.mem, {"content": "to be forgotten"})
    world.svc.forget(world.alice, world.mem, gone["id"])
    erased = world.svc.remember(world.alice, world.mem, {"content": "to be erased"})
    world.svc.erase(world.alice, world.mem, {"record_ids": [erased["id"]]})
    child = world.svc.create_memory(world.alice, {"name": "Child", "parent_id": world.mem})["id"]
    world.svc.remember(world.alice, child, {"content": "in the child"})
    other = world.svc.create_memory(world.alice, {"name": "Other"})["id"]
    world.svc.update_memory(world.alice, child, {"parent_id": other})
    world.svc.observe(world.alice, world.mem, {"episodes": [{"content": "turn one"},
                                                            {"content": "turn two"}]})
    assert_rebuild_equal(world)


def test_rebuild_equal_with_file_parts(world: World) -> None:
    up = world.svc.upload_file(world.alice, b"\x89PNG fake image bytes", name="a.png",
                               media_type="image/png")
    rec = world.svc.remember(world.alice, world.mem, {"content": [
        {"type": "file", "file": {"id": up["id"]}, "text": "a picture of the office"}]})
    assert_rebuild_equal(world)
    world.svc.erase(world.alice, world.mem, {"record_ids": [rec["id"]]})
    assert_rebuild_equal(world)


def test_rebuild_equal_after_erasing_a_merged_record(world: World) -> None:
    cs = world.bob_commit("c1", add(SECRET, memory_id="secret"), add("Keep this", memory_id="k"))
    world.bob_commit("c2", {"op_type": "attach_evidence", "target_event_id": "secret",
                            "payload": {"kind": "note", "note": "seen at Wexhollow"}})
    world.merge("p1")
    out = world.svc.erase(world.alice, world.mem, {"record_ids": ["secret"]})
    assert out == {"object": "memory.erasure", "erased": ["secret"], "unreachable": []}
    assert_rebuild_equal(world)
    # history still verifies and says where the text was
    shown = world.flow.git.get_changeset(world.a, cs["changeset_id"])
    assert shown["integrity_digest"] == cs["changeset_id"]
    assert shown["ops"][0].get("erased") is True and "payload" not in shown["ops"][0]
    assert shown["ops"][1]["payload"]["content"] == "Keep this"
    context = world.flow.git.context_at(world.a, world.mem, {})
    assert [m["memory_id"] for m in context["memories"]] == ["k"]


def test_rebuild_refuses_to_write_when_projections_differ_and_names_them(world: World) -> None:
    rec = world.svc.remember(world.alice, world.mem, {"content": "true text"})
    world.svc.remember(world.alice, world.mem, {"content": "another"})
    db = sqlite3.connect(world.data / "palimpsest.db")
    db.execute("UPDATE records SET status='forgotten' WHERE id=?", (record_key(rec["id"]),))
    db.commit()
    db.close()
    report = world.svc.rebuild()
    assert report["equal"] is False
    assert report["written"] is False
    assert any(rec["id"] in line for line in report["differences"]), report["differences"]
    db = sqlite3.connect(world.data / "palimpsest.db")
    status = db.execute("SELECT status FROM records WHERE id=?",
                        (record_key(rec["id"]),)).fetchone()[0]
    db.close()
    assert status == "forgotten"  # nothing written while not equal
    repaired = world.svc.rebuild(repair=True)
    assert repaired["written"] is True
    assert world.svc.rebuild()["equal"] is True


# --- merged records are records like any other ------------------------------------------------
def test_merged_records_have_the_record_id_scheme_and_a_complete_writer(world: World) -> None:
    cs = world.bob_commit("c1", add("Unnamed memory"))
    world.merge("p1")
    rid = cs["ops"][0]["resulting_event_id"]
    assert rid.startswith("hrec_"), rid
    got = world.svc.get_record(world.alice, world.mem, rid)
    assert got["written_by"] == {"kind": "member", "id": world.bob.member.id, "type": "agent"}


# --- erase of a merged record is true -----------------------------------------------------------
def test_erase_of_a_merged_record_leaves_no_byte_of_it_in_the_data_directory(
        world: World) -> None:
    first = world.svc.remember(world.alice, world.mem, {"type": "fact", "content": "Old address"})
    world.bob_commit("c1", {"op_type": "supersede_memory", "target_event_id": first["id"],
                            "payload": {"content": SECRET, "memory_id": "addr"}})
    world.bob_commit("c2", {"op_type": "attach_verification", "target_event_id": "addr",
                            "payload": {"kind": "call", "note": "confirmed Quokkafern by phone"}})
    world.merge("p1")
    assert grep_data_dir(world.data, "Quokkafern")  # the scenario did write it
    out = world.svc.erase(world.alice, world.mem, {"record_ids": ["addr"]})
    assert out["erased"] == ["addr"] and out["unreachable"] == []
    world.svc.close()
    assert grep_data_dir(world.data, "Quokkafern", "Wexhollow") == []


def body_of(w: World, record_id: str) -> str:
    head = w.svc._store.record_head(record_id)
    assert head is not None
    return head.body_digest


def test_a_merged_record_keeps_its_words_once(world: World) -> None:
    words = " ".join(f"Quokka{n}fern" for n in range(300))  # ~3.3 KB no dictionary knows
    note = "seen at Wexhollow " + words[:3000]
    world.bob_commit("c1", add(words, memory_id="long", summary="Wexhollow " + words[:200]))
    world.bob_commit("c2", {"op_type": "attach_evidence", "target_event_id": "long",
                            "payload": {"kind": "note", "note": note}})
    world.merge("p1")
    got = world.svc.get_record(world.alice, world.mem, "long")
    assert got["content"][0]["text"] == words and got["version"] == 2
    assert got["attributes"]["evidence"][0]["note"] == note
    db = sqlite3.connect(world.data / "palimpsest.db")
    try:
        rows = {bytes(d).hex(): (len(data), bases) for d, data, bases in db.execute(
            "SELECT digest, data, bases FROM bodies")}
    finally:
        db.close()
    # both versions are deltas of what they were derived from: copies of its ranges
    for version in world.svc._store.versions("long"):
        size, bases = rows[version.body_digest]
        assert bases is not None and size < 300, (version.version, size)
    # the words themselves: in the two payloads, deflated, less than one plain copy each
    assert sum(size for size, bases in rows.values() if bases is None) < len(words) + len(note)
    assert_rebuild_equal(world)


def test_erase_of_a_correction_that_kept_its_targets_words_removes_its_own_bytes(
        world: World) -> None:
    # a correction that changes only the kind keeps the target's words in a body of its own
    world.bob_commit("c1", add("Lunch at 12", memory_id="lunch"),
                     {"op_type": "correct_memory", "target_event_id": "lunch",
                      "resulting_event_id": "lunch2", "payload": {"kind": "decision"}})
    world.merge("p1")
    got = world.svc.get_record(world.alice, world.mem, "lunch2")
    assert got["content"][0]["text"] == "Lunch at 12"
    assert got["attributes"]["kind"] == "decision"
    assert got["attributes"]["memory_git_id"] == "lunch2"
    own = body_of(world, "lunch2")
    assert own != body_of(world, "lunch")
    out = world.svc.erase(world.alice, world.mem, {"record_ids": ["lunch2"]})
    assert out["erased"] == ["lunch2"] and out["unreachable"] == []
    assert world.svc._store.body(own) is None
    # the record it corrected still reads its own words
    history = world.svc.record_history(world.alice, world.mem, "lunch")["data"]
    assert history[0]["content"][0]["text"] == "Lunch at 12"
    assert_rebuild_equal(world)


def test_erasing_a_record_a_held_correction_took_its_words_from_says_unreachable(
        world: World) -> None:
    world.bob_commit("c1", add("Lunch at Quokkafern", memory_id="lunch"),
                     {"op_type": "correct_memory", "target_event_id": "lunch",
                      "resulting_event_id": "lunch2", "payload": {"kind": "decision"}})
    world.merge("p1")
    out = world.svc.erase(world.alice, world.mem, {"record_ids": ["lunch"]})
    # its record is gone, but its words are the correction's, derived from its payload
    assert out["erased"] == [] and out["unreachable"] == ["lunch"]
    with pytest.raises(NotFound):
        world.svc.get_record(world.alice, world.mem, "lunch")
    again = world.svc.get_record(world.alice, world.mem, "lunch2")
    assert again["content"][0]["text"] == "Lunch at Quokkafern"
    assert_rebuild_equal(world)
    # erasing the correction too takes the words from everywhere, the first payload included
    out = world.svc.erase(world.alice, world.mem, {"record_ids": ["lunch2"]})
    assert out["erased"] == ["lunch2"] and out["unreachable"] == []
    assert_rebuild_equal(world)
    assert stored_texts(world, "Quokkafern") == []


def test_erasing_a_record_with_its_correction_in_one_call_takes_both(world: World) -> None:
    world.bob_commit("c1", add("Lunch at Quokkafern", memory_id="lunch"),
                     {"op_type": "correct_memory", "target_event_id": "lunch",
                      "resulting_event_id": "lunch2", "payload": {"kind": "decision"}})
    world.merge("p1")
    assert stored_texts(world, "Quokkafern")  # the scenario did write it
    out = world.svc.erase(world.alice, world.mem, {"record_ids": ["lunch", "lunch2"]})
    assert out["erased"] == ["lunch", "lunch2"] and out["unreachable"] == []
    assert_rebuild_equal(world)
    assert stored_texts(world, "Quokkafern") == []


def test_a_diff_over_an_erased_op_says_so(world: World) -> None:
    cs = world.bob_commit("c1", add(SECRET, memory_id="secret"))
    world.merge("p1")
    world.svc.erase(world.alice, world.mem, {"record_ids": ["secret"]})
    diff = world.flow.diff(world.a, cs["changeset_id"], {})
    assert [(e["memory_id"], e.get("erased")) for e in diff["memories_added"]] == [
        ("secret", True)]
    assert SECRET not in str(diff)


def test_erase_of_a_record_that_came_through_a_reviewed_write(world: World) -> None:
    ReviewedWrites(world.flow).put_settings(world.a, world.mem, {"review_required": True})
    pending = world.svc.remember(world.bob, world.mem,
                                 {"title": "Wexhollow", "content": SECRET,
                                  "attributes": {"room": "Quokkafern hall"}},
                                 idempotency_key="w1")
    assert pending["object"] == "memory.pending_review"
    world.flow.review(world.a, pending["proposal_id"], {"verdict": "approve"})
    world.flow.merge(world.a, world.mem, world.flow.authorize(world.a, pending["proposal_id"],
                                                              {}))
    rid = pending["memory_id"]
    assert world.svc.get_record(world.alice, world.mem, rid)["written_by"]["type"] == "agent"
    assert_rebuild_equal(world)
    out = world.svc.erase(world.alice, world.mem, {"record_ids": [rid]})
    assert out["erased"] == [rid] and out["unreachable"] == []
    assert_rebuild_equal(world)
    world.svc.close()
    assert grep_data_dir(world.data, "Quokkafern", "Wexhollow") == []


@pytest.mark.parametrize("strategy", ["fast_forward", "merge_commit", "cherry_pick"])
def test_erase_after_each_merge_strategy_is_true_and_rebuild_stays_equal(
        world: World, strategy: str) -> None:
    cs = world.bob_commit("c1", add(SECRET, memory_id="secret", summary="Wexhollow"),
                          add("Bins go out Tuesday", memory_id="bins"))
    world.bob_commit("c2", {"op_type": "attach_evidence", "target_event_id": "secret",
                            "payload": {"kind": "note", "note": "Quokkafern seen"}})
    if strategy == "merge_commit":  # accepted memory moves on meanwhile
        world.svc.remember(world.alice, world.mem, {"content": "Office closed Monday"})
    selected = [f"{cs['changeset_id']}:0"] if strategy == "cherry_pick" else None
    assert world.merge("p1", selected=selected) == strategy
    assert_rebuild_equal(world)
    assert stored_texts(world, "Quokkafern", "Wexhollow")  # the scenario did write them
    # a cherry-pick derives a new op (and record id) from the branch's: the memory holds the
    # picked record, not "secret", and the branch's payloads it came from go with it
    held = [r["id"] for r in world.svc.list_records(world.alice, world.mem)["data"]
            if r["content"][0]["text"] == SECRET]
    assert held == (["secret"] if strategy != "cherry_pick" else held) and len(held) == 1
    if strategy == "cherry_pick":
        assert world.svc.erase(world.alice, world.mem, {"record_ids": ["secret"]}) == {
            "object": "memory.erasure", "erased": [], "unreachable": ["secret"]}
        assert stored_texts(world, "Quokkafern")  # nothing was taken for an id not held
    out = world.svc.erase(world.alice, world.mem, {"record_ids": held})
    assert out["erased"] == held and out["unreachable"] == []
    with pytest.raises(NotFound):
        world.svc.get_record(world.alice, world.mem, held[0])
    assert_rebuild_equal(world)
    assert stored_texts(world, "Quokkafern", "Wexhollow") == []
    # what the record never held is untouched
    if strategy != "cherry_pick":
        assert world.svc.get_record(world.alice, world.mem, "bins")["version"] == 1
