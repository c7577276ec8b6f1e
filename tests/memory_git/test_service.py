"""Memory Git service over real SQLite: ownership, CAS, idempotency, review, signed merge."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from palimpsest.errors import Conflict, Forbidden, InvalidInput, NotFound
from palimpsest.service.memorygit.flow import ReviewFlow
from tests.conftest import BOTH, Backend
from tests.memory_git.helpers import GrantTable, add, commit_body, make_flow

P = "hmem_proj"
ALICE, BOB, CAROL = "member:alice", "member:bob", "member:carol"


BACKENDS = BOTH  # refs, CAS, nonces and idempotency keys are the store's


@pytest.fixture
def env(backend: Backend) -> Iterator[tuple[ReviewFlow, GrantTable]]:
    flow, access, _ = make_flow(backend.data_dir.parent, database=backend.database_url)
    for who in (ALICE, BOB, CAROL):
        access.allow(who, P, "read", "write")
    flow.git.init(ALICE, P)
    yield flow, access
    flow.git.store.store.close()


def branch(flow: ReviewFlow, who: str, name: str) -> str:
    head = flow.git.get_ref(who, P, "refs/shared/main")["head_changeset_id"]
    flow.git.create_branch(who, P, {"ref_name": name, "head_changeset_id": head})
    return str(head)


def commit(flow: ReviewFlow, who: str, ref: str, key: str, *ops: dict[str, Any]) -> str:
    head = flow.git.get_ref(who, P, ref)["head_changeset_id"]
    cs, created = flow.git.create_changeset(who, commit_body(P, ref, head, key, *ops))
    assert created
    return str(cs["changeset_id"])


def propose_and_approve(flow: ReviewFlow, author: str, reviewer: str, ref: str,
                        key: str) -> str:
    prop, _ = flow.propose(author, P, {"source_ref": ref, "idempotency_key": key})
    flow.review(reviewer, prop["proposal_id"], {"verdict": "approve", "comment": "ok"})
    return str(prop["proposal_id"])


def test_flow_fast_forward(env: tuple[ReviewFlow, GrantTable]) -> None:
    flow, _ = env
    branch(flow, ALICE, "refs/agents/alice/main")
    head = commit(flow, ALICE, "refs/agents/alice/main", "c1", add("Acme renews in March",
                                                                    kind="fact"))
    pid = propose_and_approve(flow, ALICE, BOB, "refs/agents/alice/main", "p1")
    req = flow.authorize(BOB, pid, {})
    assert req["strategy"] == "fast_forward" and req["new_head"] == head
    out = flow.merge(BOB, P, req)
    assert out["ref"]["head_changeset_id"] == head
    ctx = flow.git.context_at(CAROL, P, {"query": "acme"})
    assert [m["content"] for m in ctx["memories"]] == ["Acme renews in March"]
    assert flow.get_proposal(ALICE, pid)["status"] == "merged"
    # Replaying the identical request: the nonce is spent.
    with pytest.raises(Conflict) as err:
        flow.merge(BOB, P, req)
    assert err.value.code == "authorization_replay"


def test_replay_refused_even_when_the_ref_cycles_back(env: tuple[ReviewFlow, GrantTable]) -> None:
    flow, _ = env
    root = branch(flow, ALICE, "refs/agents/alice/main")
    commit(flow, ALICE, "refs/agents/alice/main", "c1", add("one"))
    pid = propose_and_approve(flow, ALICE, BOB, "refs/agents/alice/main", "p1")
    req = flow.authorize(BOB, pid, {})
    flow.merge(BOB, P, req)
    flow.git.store._unsafe_set_head(P, "refs/shared/main", root)  # the ref cycles back
    with pytest.raises(Conflict) as err:
        flow.merge(BOB, P, req)
    assert err.value.code == "authorization_replay"


def test_self_review_and_self_merge_are_denied(env: tuple[ReviewFlow, GrantTable]) -> None:
    flow, _ = env
    branch(flow, ALICE, "refs/agents/alice/main")
    commit(flow, ALICE, "refs/agents/alice/main", "c1", add("x"))
    prop, _ = flow.propose(ALICE, P, {"source_ref": "refs/agents/alice/main",
                                      "idempotency_key": "p"})
    with pytest.raises(Forbidden) as err:
        flow.review(ALICE, prop["proposal_id"], {"verdict": "approve"})
    assert err.value.code == "self-review"
    flow.review(BOB, prop["proposal_id"], {"verdict": "approve"})
    with pytest.raises(Forbidden) as err:
        flow.authorize(ALICE, prop["proposal_id"], {"reviewer_principal": BOB})
    assert err.value.code == "self-merge"
    # A valid authorization for Bob, replayed by Alice, names another merger.
    req = flow.authorize(BOB, prop["proposal_id"], {})
    with pytest.raises(Forbidden):
        flow.merge(ALICE, P, req)


def test_owned_refs_are_enforced(env: tuple[ReviewFlow, GrantTable]) -> None:
    flow, _ = env
    branch(flow, ALICE, "refs/agents/alice/main")
    with pytest.raises(Forbidden):
        branch(flow, BOB, "refs/agents/alice/other")
    with pytest.raises(Forbidden):
        commit(flow, BOB, "refs/agents/alice/main", "b1", add("intrusion"))
    with pytest.raises(Forbidden):
        commit(flow, ALICE, "refs/shared/main", "direct", add("bypass"))
    branch(flow, BOB, "refs/topics/pricing")
    with pytest.raises(Forbidden):
        commit(flow, ALICE, "refs/topics/pricing", "t1", add("not mine"))
    with pytest.raises(InvalidInput):
        branch(flow, ALICE, "refs/agents/alice/../bob/main")


def test_cas_and_idempotency(env: tuple[ReviewFlow, GrantTable]) -> None:
    flow, _ = env
    root = branch(flow, ALICE, "refs/agents/alice/main")
    body = commit_body(P, "refs/agents/alice/main", root, "k1", add("first"))
    first, created = flow.git.create_changeset(ALICE, body)
    again, created_again = flow.git.create_changeset(ALICE, body)
    assert created and not created_again and again == first
    changed = commit_body(P, "refs/agents/alice/main", root, "k1", add("other"))
    with pytest.raises(Conflict) as err:
        flow.git.create_changeset(ALICE, changed)
    assert err.value.code == "idempotency_mismatch"
    stale = commit_body(P, "refs/agents/alice/main", root, "k2", add("second"))
    with pytest.raises(Conflict) as err:
        flow.git.create_changeset(ALICE, stale)
    assert err.value.code == "cas_mismatch"


@pytest.mark.parametrize(("op", "code"), [
    ({"op_type": "add_memory", "payload": {"content": "x", "secret": 1}}, "unknown-payload-key"),
    ({"op_type": "add_memory", "payload": {"content": "x", "confidence": 2}}, "invalid-changeset"),
    ({"op_type": "add_memory", "payload": {"content": "x" * 17000}}, "too-large"),
    ({"op_type": "add_memory", "payload": {"content": "  "}}, "invalid-op"),
    ({"op_type": "drop_table"}, "invalid-changeset"),
    ({"op_type": "correct_memory", "target_event_id": "nope",
      "payload": {"content": "y"}}, "invalid-op"),
])
def test_invalid_ops_write_nothing(env: tuple[ReviewFlow, GrantTable], op: dict[str, Any],
                                   code: str) -> None:
    flow, _ = env
    root = branch(flow, ALICE, "refs/agents/alice/main")
    with pytest.raises(InvalidInput) as err:
        flow.git.create_changeset(ALICE, commit_body(P, "refs/agents/alice/main", root, "k", op))
    assert err.value.code == code
    assert flow.git.get_ref(ALICE, P, "refs/agents/alice/main")["head_changeset_id"] == root


def test_request_changes_then_new_proposal(env: tuple[ReviewFlow, GrantTable]) -> None:
    flow, _ = env
    branch(flow, ALICE, "refs/agents/alice/main")
    commit(flow, ALICE, "refs/agents/alice/main", "c1", add("draft"))
    prop, _ = flow.propose(ALICE, P, {"source_ref": "refs/agents/alice/main",
                                      "idempotency_key": "p1"})
    flow.review(BOB, prop["proposal_id"], {"verdict": "request_changes", "comment": "fix"})
    with pytest.raises(Conflict):
        flow.authorize(BOB, prop["proposal_id"], {})
    commit(flow, ALICE, "refs/agents/alice/main", "c2", add("fixed"))
    second = propose_and_approve(flow, ALICE, BOB, "refs/agents/alice/main", "p2")
    assert flow.get_proposal(BOB, prop["proposal_id"])["status"] == "changes_requested"
    flow.merge(BOB, P, flow.authorize(BOB, second, {}))
    contents = {m["content"] for m in flow.git.context_at(BOB, P, {})["memories"]}
    assert contents == {"draft", "fixed"}


def test_pinned_head_ignores_later_commits(env: tuple[ReviewFlow, GrantTable]) -> None:
    flow, _ = env
    branch(flow, ALICE, "refs/agents/alice/main")
    pinned = commit(flow, ALICE, "refs/agents/alice/main", "c1", add("reviewed"))
    pid = propose_and_approve(flow, ALICE, BOB, "refs/agents/alice/main", "p1")
    commit(flow, ALICE, "refs/agents/alice/main", "c2", add("sneaked in after approval"))
    out = flow.merge(BOB, P, flow.authorize(BOB, pid, {}))
    assert out["ref"]["head_changeset_id"] == pinned
    contents = {m["content"] for m in flow.git.context_at(BOB, P, {})["memories"]}
    assert contents == {"reviewed"}


def test_merge_commit_and_cherry_pick(env: tuple[ReviewFlow, GrantTable]) -> None:
    flow, _ = env
    branch(flow, ALICE, "refs/agents/alice/main")
    branch(flow, CAROL, "refs/agents/carol/main")
    commit(flow, ALICE, "refs/agents/alice/main", "a1", add("from alice"))
    commit(flow, CAROL, "refs/agents/carol/main", "c1", add("from carol"))
    cs2 = commit(flow, CAROL, "refs/agents/carol/main", "c2", add("carol two"), add("three"))
    p1 = propose_and_approve(flow, ALICE, BOB, "refs/agents/alice/main", "pa")
    flow.merge(BOB, P, flow.authorize(BOB, p1, {}))
    prop, _ = flow.propose(CAROL, P, {"source_ref": "refs/agents/carol/main",
                                      "idempotency_key": "pc", "selected_ops": [f"{cs2}:1"]})
    flow.review(BOB, prop["proposal_id"], {"verdict": "approve"})
    req = flow.authorize(BOB, prop["proposal_id"], {})
    assert req["strategy"] == "cherry_pick"
    flow.merge(BOB, P, req)
    contents = {m["content"] for m in flow.git.context_at(BOB, P, {})["memories"]}
    assert contents == {"from alice", "three"}
    # A whole branch behind the target needs a merge commit.
    p3 = propose_and_approve(flow, CAROL, BOB, "refs/agents/carol/main", "pc2")
    kinds = {c["conflict_type"] for c in flow.git.store.conflicts(P, "open", 50)
             if c["proposal_id"] == p3}
    assert kinds == {"stale_base", "duplicate_content"}
    req = flow.authorize(BOB, p3, {})
    assert req["strategy"] == "merge_commit"
    out = flow.merge(BOB, P, req)
    merge = flow.git.get_changeset(BOB, out["ref"]["head_changeset_id"])
    assert len(merge["parent_ids"]) == 2 and merge["ops"] == []
    contents = sorted(m["content"] for m in flow.git.context_at(BOB, P, {})["memories"])
    assert contents == ["carol two", "from alice", "from carol", "three", "three"]


def test_concurrent_merges_exactly_one_cas_wins(env: tuple[ReviewFlow, GrantTable]) -> None:
    flow, _ = env
    branch(flow, ALICE, "refs/agents/alice/main")
    branch(flow, CAROL, "refs/agents/carol/main")
    commit(flow, ALICE, "refs/agents/alice/main", "a1", add("alice"))
    commit(flow, CAROL, "refs/agents/carol/main", "c1", add("carol"))
    pa = propose_and_approve(flow, ALICE, BOB, "refs/agents/alice/main", "pa")
    pc = propose_and_approve(flow, CAROL, ALICE, "refs/agents/carol/main", "pc")
    reqs = [(BOB, flow.authorize(BOB, pa, {})), (ALICE, flow.authorize(ALICE, pc, {}))]
    barrier = threading.Barrier(2)
    results: list[Any] = []

    def run(who: str, req: dict[str, Any]) -> None:
        barrier.wait()
        try:
            results.append(flow.merge(who, P, req))
        except Conflict as exc:
            results.append(exc)

    threads = [threading.Thread(target=run, args=r) for r in reqs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wins = [r for r in results if isinstance(r, dict)]
    losses = [r for r in results if isinstance(r, Conflict)]
    assert len(wins) == 1 and len(losses) == 1
    assert losses[0].code == "cas_mismatch" and "re-read" in (losses[0].hint or "")
    loser = next(req for _, req in reqs
                 if req["merge_proposal_id"] != wins[0]["proposal"]["proposal_id"])
    from palimpsest.service.memorygit import mergeauth
    nonce = mergeauth.decode_wire(loser["merge_authorization"])[0].nonce
    assert not flow.git.store.nonce_consumed(nonce)  # documented: the loser keeps its nonce


def test_unknown_project_and_missing_grant(env: tuple[ReviewFlow, GrantTable]) -> None:
    flow, access = env
    with pytest.raises(NotFound):
        flow.git.list_refs("member:mallory", P)
    access.allow("member:reader", P, "read")
    with pytest.raises(Forbidden):
        flow.git.create_branch("member:reader", P, {"ref_name": "refs/agents/reader/x"})


def test_forged_cherry_pick_content_is_refused(env: tuple[ReviewFlow, GrantTable]) -> None:
    from palimpsest.service.memorygit import mergeauth

    flow, _ = env
    branch(flow, ALICE, "refs/agents/alice/main")
    cs = commit(flow, ALICE, "refs/agents/alice/main", "a1", add("safe"), add("also safe"))
    prop, _ = flow.propose(ALICE, P, {"source_ref": "refs/agents/alice/main",
                                      "idempotency_key": "p", "selected_ops": [f"{cs}:0"]})
    flow.review(BOB, prop["proposal_id"], {"verdict": "approve"})
    honest = flow.authorize(BOB, prop["proposal_id"], {})
    # The reviewer prepares its own "pick" with other content and signs for it.
    forged, _ = flow.git.create_changeset(BOB, {
        "project_id": P, "ref_name": "refs/shared/main", "advance_ref": False,
        "parent_ids": [honest["expected_head"]], "idempotency_key": "forge",
        "ops": [{"op_type": "add_memory",
                 "payload": {"content": "poisoned", "cherrypicked_from": cs}}]})
    request = mergeauth.MergeRequest(P, "refs/shared/main", honest["expected_head"],
                                     forged["changeset_id"], prop["proposal_id"], BOB)
    _, wire = mergeauth.build(request, proposal_digest=prop["proposal_digest"],
                              merger_principal=BOB, strategy="cherry_pick", ring=flow.ring,
                              now_ns=flow.git.clock())
    with pytest.raises(Conflict) as err:
        flow.merge(BOB, P, {**honest, "new_head": forged["changeset_id"],
                            "merge_authorization": wire})
    assert err.value.code == "merge-shape"
    flow.merge(BOB, P, honest)
    assert [m["content"] for m in flow.git.context_at(BOB, P, {})["memories"]] == ["safe"]


def test_unadvanced_commits_respect_ownership_and_selection_bounds(
        env: tuple[ReviewFlow, GrantTable]) -> None:
    flow, _ = env
    root = branch(flow, ALICE, "refs/agents/alice/main")
    with pytest.raises(Forbidden):
        flow.git.create_changeset(BOB, {
            "project_id": P, "ref_name": "refs/agents/alice/main", "advance_ref": False,
            "parent_ids": [root], "idempotency_key": "x", "ops": [add("squat")]})
    cs = commit(flow, ALICE, "refs/agents/alice/main", "a1", add("one"))
    with pytest.raises(InvalidInput):
        flow.propose(ALICE, P, {"source_ref": "refs/agents/alice/main",
                                "idempotency_key": "p", "selected_ops": [f"{cs}:5"]})


def test_tampered_changeset_is_refused_on_read(env: tuple[ReviewFlow, GrantTable]) -> None:
    from palimpsest import canonical
    from palimpsest.errors import Unavailable
    from palimpsest.service.memorygit.repository import GitService
    from palimpsest.service.storage.pack import pack, unpack

    flow, access = env
    branch(flow, ALICE, "refs/agents/alice/main")
    cid = commit(flow, ALICE, "refs/agents/alice/main", "c1", add("the truth"))
    db = flow.git.store.store.connection()
    found = flow.git.store.changeset(cid)
    assert found is not None
    # the payload, kept apart from the changeset, rewritten in place
    with flow.git.store.transaction():
        key = bytes.fromhex(found.ops[0].payload_digest or "")
        data = db.execute("SELECT data FROM bodies WHERE digest = ?", (key,)).fetchone()[0]
        db.execute("UPDATE bodies SET data = ? WHERE digest = ?",
                   (pack(unpack(data).replace(b"the truth", b"a lie!!!!")), key))
    cold = GitService(flow.git.store, access)  # no cache: reads storage
    with pytest.raises(Unavailable) as err:
        cold.get_changeset(ALICE, cid)
    assert err.value.code == "integrity_failure"
    with pytest.raises(Unavailable):
        cold.context_at(ALICE, P, {"ref_name": "refs/agents/alice/main"})
    # and the changeset's own canonical document rewritten
    with flow.git.store.transaction():
        row = db.execute("SELECT doc FROM changesets WHERE id = ?", (bytes.fromhex(cid),))
        doc = canonical.decode(unpack(row.fetchone()[0]), allow_floats=True)
        doc["message"] = "a quiet rewrite"
        db.execute("UPDATE changesets SET doc = ? WHERE id = ?",
                   (pack(canonical.encode(doc)), bytes.fromhex(cid)))
    with pytest.raises(Unavailable):
        GitService(flow.git.store, access).get_changeset(ALICE, cid)


def test_persist_and_retire_conflicts(env: tuple[ReviewFlow, GrantTable]) -> None:
    flow, _ = env
    root = branch(flow, ALICE, "refs/agents/alice/main")
    head = commit(flow, ALICE, "refs/agents/alice/main", "c1",
                  add("we always ship on Fridays", kind="decision", protected=True))
    pid = propose_and_approve(flow, ALICE, BOB, "refs/agents/alice/main", "p1")
    flow.merge(BOB, P, flow.authorize(BOB, pid, {}))
    branch(flow, CAROL, "refs/agents/carol/main")
    decision = flow.git.context_at(CAROL, P, {})["memories"][0]["memory_id"]
    change = commit(flow, CAROL, "refs/agents/carol/main", "c2",
                    {"op_type": "propose_deprecation", "target_event_id": decision,
                     "payload": {"reason": "no more Friday ships"}})
    found = flow.detect(CAROL, P, {"base_changeset_id": head, "left_changeset_id": head,
                                   "right_changeset_id": change})["conflicts"]
    assert [c["conflict_type"] for c in found] == ["contradicts_protected_decision"]
    prop, _ = flow.propose(CAROL, P, {"source_ref": "refs/agents/carol/main",
                                      "idempotency_key": "p2"})

    def open_kinds() -> list[str]:
        rows = flow.list_conflicts(BOB, P, "open", 100)["conflicts"]
        return sorted(c["conflict_type"] for c in rows if c["proposal_id"] == prop["proposal_id"])

    assert open_kinds() == ["contradicts_protected_decision"]  # found when it was opened
    # conflict ids are deterministic: the detected conflict IS the one the proposal holds
    assert prop["conflict_ids"] == [found[0]["conflict_id"]]
    flow.persist_conflicts(BOB, P, {"proposal_id": prop["proposal_id"], "conflicts": found})
    assert open_kinds() == ["contradicts_protected_decision"]  # persisting again: no copy
    flow.review(BOB, prop["proposal_id"], {"verdict": "approve"})
    with pytest.raises(Conflict) as err:
        flow.authorize(BOB, prop["proposal_id"], {})
    assert err.value.code == "unresolved-conflicts"
    with pytest.raises(Forbidden):
        flow.retire_conflicts(CAROL, P, {"proposal_id": prop["proposal_id"],
                                         "status": "resolved"})
    out = flow.retire_conflicts(BOB, P, {"proposal_id": prop["proposal_id"],
                                         "status": "resolved"})
    assert out["retired"] == 1 and open_kinds() == []
    flow.merge(BOB, P, flow.authorize(BOB, prop["proposal_id"], {}))
    assert flow.git.get_ref(BOB, P, "refs/shared/main")["head_changeset_id"] not in (root, head)
