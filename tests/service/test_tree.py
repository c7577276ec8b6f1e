"""The tree and grants through MemoryService, on real SQLite."""

from __future__ import annotations

import pytest

from palimpsest.errors import Conflict, Forbidden, InvalidInput, NotFound
from palimpsest.service import MemoryService
from palimpsest.service.model import Caller
from tests.conftest import BOTH
from tests.service.conftest import member

BACKENDS = BOTH  # the store is what these tests exercise


def test_create_list_get(svc: MemoryService, owner: Caller) -> None:
    root = svc.create_memory(owner, {"name": "Company", "description": "all we know"})
    child = svc.create_memory(owner, {"name": "Acme", "parent_id": root["id"]})
    assert root["id"].startswith("hmem_") and root["parent_id"] is None
    assert child["ancestors"] == [root["id"]]
    assert child["provider"] == "builtin"
    assert child["privileges"] == ["read", "write", "create", "delete"]
    assert [m["id"] for m in svc.list_memories(owner)["data"]] == [root["id"]]
    assert [m["id"] for m in svc.list_memories(owner, parent=root["id"])["data"]] == [child["id"]]
    assert [m["id"] for m in svc.list_memories(owner, ancestor=root["id"])["data"]] == [
        child["id"]]
    got = svc.get_memory(owner, root["id"])
    assert got["children"] == {"count": 1} and got["records"] == {"count": 0}


def test_unknown_and_forbidden_look_the_same(svc: MemoryService, owner: Caller) -> None:
    root = svc.create_memory(owner, {"name": "Private"})
    other = member(svc, "eve")
    errors = []
    for mid in (root["id"], "hmem_doesnotexist"):
        with pytest.raises(NotFound) as exc:
            svc.get_memory(other, mid)
        errors.append((exc.value.code, exc.value.message))
    assert errors[0] == errors[1] == ("memory_not_found", errors[0][1])
    assert svc.list_memories(other)["data"] == []


def test_seen_but_not_permitted_is_forbidden(svc: MemoryService, owner: Caller) -> None:
    root = svc.create_memory(owner, {"name": "Shared"})
    reader = member(svc, "reader")
    svc.put_grant(owner, root["id"], {"principal": f"member:{reader.member.id}",
                                      "privileges": ["read"]})
    with pytest.raises(Forbidden) as exc:
        svc.remember(reader, root["id"], {"content": "x"})
    assert exc.value.code == "memory_forbidden"
    with pytest.raises(Forbidden):
        svc.create_memory(reader, {"name": "child", "parent_id": root["id"]})


def test_move_refuses_cycles_and_keeps_store(svc: MemoryService, owner: Caller) -> None:
    a = svc.create_memory(owner, {"name": "a"})
    b = svc.create_memory(owner, {"name": "b", "parent_id": a["id"]})
    with pytest.raises(InvalidInput) as exc:
        svc.update_memory(owner, a["id"], {"parent_id": b["id"]})
    assert exc.value.code == "memory_invalid"
    assert svc.get_memory(owner, a["id"])["parent_id"] is None
    c = svc.create_memory(owner, {"name": "c"})
    moved = svc.update_memory(owner, b["id"], {"parent_id": c["id"], "name": "b2"})
    assert moved["parent_id"] == c["id"] and moved["name"] == "b2"
    with pytest.raises(InvalidInput):
        svc.update_memory(owner, a["id"], {"provider": "other"})
    with pytest.raises(InvalidInput):
        svc.update_memory(owner, a["id"], {"colour": "red"})


def test_delete_removes_descendants_and_records(svc: MemoryService, owner: Caller) -> None:
    a = svc.create_memory(owner, {"name": "a"})
    b = svc.create_memory(owner, {"name": "b", "parent_id": a["id"]})
    rec = svc.remember(owner, b["id"], {"content": "kept below"})
    f = svc.upload_file(owner, b"%PDF-1.4 bytes", name="c.pdf", media_type="application/pdf")
    svc.remember(owner, b["id"], {"content": [{"type": "file", "file": {"id": f["id"]}}]})
    out = svc.delete_memory(owner, a["id"])
    assert not any(p.is_file() for p in (svc._store.data_dir / "files").rglob("*"))
    left = svc._store._db.execute("SELECT COUNT(*) FROM bodies").fetchone()[0]
    assert left == 0
    assert out["deleted"] is True and set(out["memories"]) == {a["id"], b["id"]}
    with pytest.raises(NotFound):
        svc.get_memory(owner, b["id"])
    with pytest.raises(NotFound):
        svc.get_record(owner, b["id"], rec["id"])


def test_delete_does_not_name_descendants_the_caller_cannot_see(svc: MemoryService,
                                                                owner: Caller) -> None:
    admin = member(svc, "admin", "human")
    a = svc.create_memory(owner, {"name": "a"})
    hidden = svc.create_memory(owner, {"name": "hidden", "parent_id": a["id"],
                                       "restricted": True})
    svc.put_grant(owner, a["id"], {"principal": f"member:{admin.member.id}",
                                   "privileges": ["read", "delete"]})
    out = svc.delete_memory(admin, a["id"])
    assert out["memories"] == [a["id"]]
    with pytest.raises(NotFound):
        svc.get_memory(owner, hidden["id"])


def test_grants_replace_inherit_and_delete(svc: MemoryService, owner: Caller) -> None:
    a = svc.create_memory(owner, {"name": "a"})
    b = svc.create_memory(owner, {"name": "b", "parent_id": a["id"]})
    bob = member(svc, "bob")
    g1 = svc.put_grant(owner, a["id"], {"principal": f"member:{bob.member.id}",
                                        "privileges": ["read"]})
    g2 = svc.put_grant(owner, a["id"], {"principal": f"member:{bob.member.id}",
                                        "privileges": ["read", "write"]})
    assert g1["id"] == g2["id"] and g2["privileges"] == ["read", "write"]
    listed = svc.list_grants(owner, b["id"])["data"]
    inherited = [g for g in listed if g["inherited"] and g["principal"].endswith(bob.member.id)]
    assert inherited and inherited[0]["memory_id"] == a["id"]
    assert svc.get_memory(bob, b["id"])["privileges"] == ["read", "write"]
    svc.delete_grant(owner, a["id"], g1["id"])
    with pytest.raises(NotFound):
        svc.get_memory(bob, b["id"])
    with pytest.raises(InvalidInput):
        svc.put_grant(owner, a["id"], {"principal": "member:hmbr_nobody",
                                       "privileges": ["read"]})
    with pytest.raises(InvalidInput):
        svc.put_grant(owner, a["id"], {"principal": "provider:builtin", "privileges": ["read"]})
    with pytest.raises(InvalidInput):
        svc.put_grant(owner, a["id"], {"principal": f"member:{bob.member.id}",
                                       "privileges": ["deny"]})


def test_group_membership_grants_like_a_person(svc: MemoryService, owner: Caller) -> None:
    a = svc.create_memory(owner, {"name": "team"})
    agent = member(svc, "agent-1", "agent")
    group = svc.create_group("sales team")
    svc.put_grant(owner, a["id"], {"principal": f"group:{group.id}", "privileges": ["read"]})
    with pytest.raises(NotFound):
        svc.get_memory(agent, a["id"])
    svc.add_membership(group.id, agent.member.id)
    assert svc.get_memory(svc.caller(agent.member.id), a["id"])["privileges"] == ["read"]


def test_restrict_closes_a_branch(svc: MemoryService, owner: Caller) -> None:
    a = svc.create_memory(owner, {"name": "a"})
    b = svc.create_memory(owner, {"name": "b", "parent_id": a["id"]})
    bob = member(svc, "bob")
    svc.put_grant(owner, a["id"], {"principal": f"member:{bob.member.id}",
                                   "privileges": ["read"]})
    assert svc.get_memory(bob, b["id"])
    svc.update_memory(owner, b["id"], {"restricted": True})
    with pytest.raises(NotFound):
        svc.get_memory(bob, b["id"])
    assert svc.get_memory(bob, a["id"])["children"] == {"count": 0}


def test_idempotent_create_and_mismatch(svc: MemoryService, owner: Caller) -> None:
    first = svc.create_memory(owner, {"name": "once"}, idempotency_key="k1")
    again = svc.create_memory(owner, {"name": "once"}, idempotency_key="k1")
    assert first == again
    assert len(svc.list_memories(owner)["data"]) == 1
    with pytest.raises(Conflict) as exc:
        svc.create_memory(owner, {"name": "other"}, idempotency_key="k1")
    assert exc.value.code == "idempotency_mismatch"


def test_bad_bodies_are_refused(svc: MemoryService, owner: Caller) -> None:
    for body in ({}, {"name": ""}, {"name": 3}, {"name": "x" * 201}, {"name": "x", "zz": 1},
                 {"name": "x", "restricted": "yes"}, {"name": "x", "parent_id": None,
                                                      "provider": "elsewhere"}):
        with pytest.raises(InvalidInput):
            svc.create_memory(owner, body)
    assert svc.list_memories(owner)["data"] == []
    with pytest.raises(NotFound):
        svc.create_memory(owner, {"name": "x", "parent_id": "hmem_missing"})


def test_unseen_parent_is_not_named(svc: MemoryService, owner: Caller) -> None:
    top = svc.create_memory(owner, {"name": "top"})["id"]
    below = svc.create_memory(owner, {"name": "below", "parent_id": top})["id"]
    bob = member(svc, "bob")
    svc.put_grant(owner, below, {"principal": f"member:{bob.member.id}", "privileges": ["read"]})
    seen = svc.get_memory(bob, below)
    assert seen["parent_id"] is None and seen["ancestors"] == []
    for listing in (svc.list_memories(bob), svc.list_memories(bob, granted=True)):
        assert top not in str(listing)
    assert svc.get_memory(owner, below)["parent_id"] == top


def test_delete_replay_returns_the_first_answer(svc: MemoryService, owner: Caller) -> None:
    a = svc.create_memory(owner, {"name": "a"})["id"]
    first = svc.delete_memory(owner, a, idempotency_key="del-1")
    assert svc.delete_memory(owner, a, idempotency_key="del-1") == first
    with pytest.raises(NotFound):
        svc.delete_memory(owner, a, idempotency_key="del-2")
    with pytest.raises(NotFound):
        svc.delete_memory(member(svc, "eve"), a, idempotency_key="del-1")
