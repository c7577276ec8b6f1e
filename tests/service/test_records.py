"""Records: remember, get, list, history, revise, forget, erase, as_of, content parts."""

from __future__ import annotations

import pytest

from palimpsest.errors import Conflict, InvalidInput, NotFound
from palimpsest.service import MemoryService
from palimpsest.service.model import Caller
from tests.conftest import BOTH
from tests.service.conftest import FakeClock, member
from tests.stored import grep_data_dir

BACKENDS = BOTH  # the store is what these tests exercise


@pytest.fixture
def mem(svc: MemoryService, owner: Caller) -> str:
    return str(svc.create_memory(owner, {"name": "notes"})["id"])


def test_remember_stamps_writer_and_marks_untrusted(svc: MemoryService, owner: Caller,
                                                    mem: str) -> None:
    rec = svc.remember(owner, mem, {"type": "fact", "title": "Acme renews in March",
                                    "content": "Renewal is in March.",
                                    "attributes": {"account": "acme"}})
    assert rec["version"] == 1 and rec["status"] == "active" and rec["supersedes"] is None
    assert rec["content"] == [{"type": "text", "text": "Renewal is in March."}]
    assert rec["written_by"] == {"kind": "member", "id": owner.member.id, "type": "human"}
    assert rec["trust"] == "untrusted"
    assert svc.get_record(owner, mem, rec["id"]) == rec
    with pytest.raises(InvalidInput):
        svc.remember(owner, mem, {"content": "x", "written_by": {"kind": "member", "id": "z"}})


def test_record_of_another_memory_is_refused(svc: MemoryService, owner: Caller,
                                             mem: str) -> None:
    other = svc.create_memory(owner, {"name": "other"})["id"]
    rec = svc.remember(owner, other, {"content": "elsewhere"})
    for call in (lambda: svc.get_record(owner, mem, rec["id"]),
                 lambda: svc.record_history(owner, mem, rec["id"]),
                 lambda: svc.revise(owner, mem, rec["id"], {"title": "x"}),
                 lambda: svc.forget(owner, mem, rec["id"])):
        with pytest.raises(NotFound) as exc:
            call()
        assert exc.value.code == "memory_record_not_found"
    assert svc.get_record(owner, other, rec["id"])["version"] == 1


def test_revise_history_forget_and_as_of(svc: MemoryService, owner: Caller, mem: str,
                                         clock: FakeClock) -> None:
    rec = svc.remember(owner, mem, {"title": "v1", "content": "first"})
    t1 = rec["time"]["written_at"]
    clock.tick()
    v2 = svc.revise(owner, mem, rec["id"], {"title": "v2", "reason": "newer"})
    assert (v2["id"], v2["version"], v2["supersedes"]) == (rec["id"], 2, 1)
    assert v2["content"] == rec["content"]  # kept when not revised
    assert v2["attributes"] == {"revision_reason": "newer"}
    hist = svc.record_history(owner, mem, rec["id"])["data"]
    assert [(h["version"], h["status"]) for h in hist] == [(1, "superseded"), (2, "active")]
    assert hist[0]["time"]["invalidated_at"] == v2["time"]["written_at"]
    clock.tick()
    gone = svc.forget(owner, mem, rec["id"])
    assert gone["status"] == "forgotten" and gone["version"] == 2
    assert svc.list_records(owner, mem)["data"] == []
    assert [r["id"] for r in svc.list_records(owner, mem, include="all")["data"]] == [rec["id"]]
    old = svc.get_record(owner, mem, rec["id"], as_of=t1)
    assert old["title"] == "v1" and old["status"] == "active"
    at_v2 = svc.get_record(owner, mem, rec["id"], as_of=v2["time"]["written_at"])
    assert at_v2["title"] == "v2" and at_v2["status"] == "active"
    assert [r["title"] for r in svc.list_records(owner, mem, as_of=t1)["data"]] == ["v1"]
    with pytest.raises(NotFound):
        svc.get_record(owner, mem, rec["id"], as_of="2000-01-01T00:00:00Z")
    with pytest.raises(InvalidInput):
        svc.revise(owner, mem, rec["id"], {})


def test_erase_removes_bytes_and_reports_unreachable(svc: MemoryService, owner: Caller,
                                                     mem: str) -> None:
    secret = "the launch code is swordfish"
    rec = svc.remember(owner, mem, {"content": secret}, idempotency_key="k")
    svc.revise(owner, mem, rec["id"], {"content": secret + " two"})
    other = svc.create_memory(owner, {"name": "o"})["id"]
    elsewhere = svc.remember(owner, other, {"content": "x"})
    url = getattr(svc._store, "url", None)  # the PostgreSQL database, if that is the store
    assert grep_data_dir(svc._store.data_dir, "swordfish", database=url)  # where erase looks
    out = svc.erase(owner, mem, {"record_ids": [rec["id"], elsewhere["id"], "hrec_unknown"]})
    assert out == {"object": "memory.erasure", "erased": [rec["id"]],
                   "unreachable": [elsewhere["id"], "hrec_unknown"]}
    with pytest.raises(NotFound):
        svc.get_record(owner, mem, rec["id"])
    assert svc.recall(owner, mem, {"text": "swordfish"})["results"] == []
    svc.close()
    assert grep_data_dir(svc._store.data_dir, "swordfish", database=url) == []


def test_erase_is_for_delete_holders(svc: MemoryService, owner: Caller, mem: str) -> None:
    writer = member(svc, "w")
    svc.put_grant(owner, mem, {"principal": f"member:{writer.member.id}",
                               "privileges": ["read", "write"]})
    rec = svc.remember(writer, mem, {"content": "x"})
    with pytest.raises(Exception) as exc:
        svc.erase(writer, mem, {"record_ids": [rec["id"]]})
    assert getattr(exc.value, "code", None) == "memory_forbidden"


def test_remember_idempotency(svc: MemoryService, owner: Caller, mem: str) -> None:
    a = svc.remember(owner, mem, {"content": "once"}, idempotency_key="abc")
    b = svc.remember(owner, mem, {"content": "once"}, idempotency_key="abc")
    assert a == b
    assert len(svc.list_records(owner, mem)["data"]) == 1
    with pytest.raises(Conflict):
        svc.remember(owner, mem, {"content": "twice"}, idempotency_key="abc")
    assert len(svc.list_changesets(owner, mem)["data"]) == 1


@pytest.mark.parametrize("body", [
    {}, {"content": 5}, {"content": [{"type": "video"}]}, {"type": "Fact", "content": "x"},
    {"content": "x", "title": "t" * 301}, {"content": [{"type": "text"}], "title": None},
    {"content": "x", "references": [{"rel": "subject", "record_id": "a"},
                                    {"rel": "subject", "record_id": "b"}]},
    {"content": "x", "attributes": {"a": "b" * 20000}},
    {"content": "x", "time": {"valid_from": "yesterday"}},
    {"content": "x", "time": {"written_at": "2026-01-01T00:00:00Z"}},
    {"content": [{"type": "file", "file": {"id": "hfile_missing"}}]},
    {"content": "x" * 70000},
], ids=lambda b: str(sorted(b))[:40])
def test_bad_records_refused_and_nothing_written(svc: MemoryService, owner: Caller, mem: str,
                                                 body: dict[str, object]) -> None:
    with pytest.raises(InvalidInput) as exc:
        svc.remember(owner, mem, body)
    assert exc.value.code == "memory_invalid"
    assert svc.list_records(owner, mem, include="all")["data"] == []
    assert svc.list_changesets(owner, mem)["data"] == []


def test_content_parts_files_and_extensions(svc: MemoryService, owner: Caller,
                                            mem: str) -> None:
    png = bytes(range(256)) * 3
    f = svc.upload_file(owner, png, name="chart.png", media_type="image/png")
    assert f["bytes"] == len(png)
    parts = [{"type": "text", "text": "see the chart", "role": "user"},
             {"type": "file", "file": {"id": f["id"]}, "text": "a bar chart of renewals"},
             {"type": "x.vendor", "payload": {"k": [1, 2]}}]
    rec = svc.remember(owner, mem, {"content": parts})
    assert rec["content"][0] == parts[0]
    assert rec["content"][1]["file"] == {"id": f["id"], "name": "chart.png",
                                         "media_type": "image/png", "bytes": len(png)}
    assert rec["content"][1]["text_source"] == "stated"
    assert rec["content"][2] == parts[2]
    got = svc.record_content(owner, mem, rec["id"], 1)
    assert got.data == png and got.media_type == "image/png"
    for index in (0, 2, 3, -1):
        with pytest.raises(NotFound):
            svc.record_content(owner, mem, rec["id"], index)
    assert svc.recall(owner, mem, {"text": "bar chart"})["results"][0]["record"]["id"] == rec["id"]
    with pytest.raises(InvalidInput) as exc:
        svc.upload_file(owner, b"MZ", name="x.exe", media_type="application/x-msdownload")
    assert exc.value.code == "memory_unsupported"
    svc.erase(owner, mem, {"record_ids": [rec["id"]]})
    assert not any(p.is_file() for p in (svc._store.data_dir / "files").rglob("*"))


def test_references_to_unreadable_memories_are_unavailable(svc: MemoryService, owner: Caller,
                                                           mem: str) -> None:
    hidden = svc.create_memory(owner, {"name": "hidden"})["id"]
    target = svc.remember(owner, hidden, {"type": "entity", "title": "Acme"})
    bob = member(svc, "bob")
    svc.put_grant(owner, mem, {"principal": f"member:{bob.member.id}",
                               "privileges": ["read", "write"]})
    rec = svc.remember(bob, mem, {"content": "about acme",
                                  "references": [{"rel": "about", "record_id": target["id"]}]})
    assert rec["references"] == [{"record_id": target["id"], "available": False}]
    assert svc.get_record(owner, mem, rec["id"])["references"] == [
        {"rel": "about", "memory_id": hidden, "record_id": target["id"]}]
    # A reviser keeps the edge it cannot read.
    v2 = svc.revise(bob, mem, rec["id"], {"references": []})
    assert v2["references"] == [{"record_id": target["id"], "available": False}]


def test_agents_never_erase(svc: MemoryService, owner: Caller, mem: str) -> None:
    agent = member(svc, "bot", "agent")
    svc.put_grant(owner, mem, {"principal": f"member:{agent.member.id}",
                               "privileges": ["read", "write", "create", "delete"]})
    rec = svc.remember(agent, mem, {"content": "x"})
    with pytest.raises(Exception) as exc:
        svc.erase(agent, mem, {"record_ids": [rec["id"]]})
    assert getattr(exc.value, "code", None) == "memory_forbidden"
    assert svc.forget(agent, mem, rec["id"])["status"] == "forgotten"
    assert svc.erase(owner, mem, {"record_ids": [rec["id"]]})["erased"] == [rec["id"]]
