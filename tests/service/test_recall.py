"""Recall over the readable subtree, with several principals (isolation beyond ME-03)."""

from __future__ import annotations

import pytest

from palimpsest.errors import InvalidInput, NotFound
from palimpsest.service import MemoryService
from palimpsest.service.model import Caller
from tests.conftest import BOTH
from tests.service.conftest import member

BACKENDS = BOTH  # the store is what these tests exercise


@pytest.fixture
def tree(svc: MemoryService, owner: Caller) -> dict[str, str]:
    ids: dict[str, str] = {}
    ids["root"] = svc.create_memory(owner, {"name": "Company"})["id"]
    ids["sales"] = svc.create_memory(owner, {"name": "Sales", "parent_id": ids["root"]})["id"]
    ids["acme"] = svc.create_memory(owner, {"name": "Acme", "parent_id": ids["sales"]})["id"]
    ids["vault"] = svc.create_memory(owner, {"name": "Vault", "parent_id": ids["sales"],
                                             "restricted": True})["id"]
    ids["inner"] = svc.create_memory(owner, {"name": "Inner", "parent_id": ids["vault"]})["id"]
    for name, text in (("root", "renewal policy for every customer"),
                       ("sales", "sales renewal pipeline"),
                       ("acme", "Acme renewal is in March"),
                       ("vault", "vault renewal secret"),
                       ("inner", "inner renewal note")):
        svc.remember(owner, ids[name], {"content": text, "attributes": {"where": name}})
    return ids


def found(out: dict[str, object]) -> list[str]:
    return [r["memory"]["name"] for r in out["results"]]  # type: ignore[attr-defined,index]


def test_down_never_up_and_results_name_their_memory(svc: MemoryService, owner: Caller,
                                                     tree: dict[str, str]) -> None:
    out = svc.recall(owner, tree["sales"], {"text": "renewal", "limit": 10})
    assert sorted(found(out)) == ["Acme", "Inner", "Sales", "Vault"]
    assert out["parent"]["id"] == tree["root"]
    assert {c["name"] for c in out["children"]} == {"Acme", "Vault"}
    assert out["degraded"] == [] and out["abstain"] is False
    for r in out["results"]:
        assert r["record"]["memory_id"] == r["memory"]["id"]
        assert r["record"]["trust"] == "untrusted" and r["record"]["written_by"]
        assert r["why"] == ["text"]


def test_depth_limit_types_include(svc: MemoryService, owner: Caller,
                                   tree: dict[str, str]) -> None:
    assert found(svc.recall(owner, tree["sales"], {"text": "renewal", "depth": 0})) == ["Sales"]
    assert sorted(found(svc.recall(owner, tree["sales"], {"text": "renewal", "depth": 1,
                                                          "limit": 10}))) == [
        "Acme", "Sales", "Vault"]
    assert len(svc.recall(owner, tree["root"], {"text": "renewal", "limit": 2})["results"]) == 2
    assert svc.recall(owner, tree["root"], {"text": "renewal", "types": ["note"]})[
        "results"] == []
    acme = svc.recall(owner, tree["acme"], {"text": "march"})["results"][0]["record"]
    svc.forget(owner, tree["acme"], acme["id"])
    assert svc.recall(owner, tree["acme"], {"text": "march"})["results"] == []
    again = svc.recall(owner, tree["acme"], {"text": "march", "include": "all"})["results"]
    assert again[0]["record"]["status"] == "forgotten"


def test_cutoff_and_grant_inside_closed_branch(svc: MemoryService, owner: Caller,
                                               tree: dict[str, str]) -> None:
    bob = member(svc, "bob")
    svc.put_grant(owner, tree["root"], {"principal": f"member:{bob.member.id}",
                                        "privileges": ["read"]})
    out = svc.recall(bob, tree["root"], {"text": "renewal", "limit": 20})
    assert sorted(found(out)) == ["Acme", "Company", "Sales"]
    svc.put_grant(owner, tree["inner"], {"principal": f"member:{bob.member.id}",
                                         "privileges": ["read"]})
    out = svc.recall(bob, tree["root"], {"text": "renewal", "limit": 20})
    assert sorted(found(out)) == ["Acme", "Company", "Inner", "Sales"]
    nav = svc.recall(bob, tree["sales"], {"text": "renewal"})
    assert [c["name"] for c in nav["children"]] == ["Acme"]  # the vault is not named


def test_isolation_between_members(svc: MemoryService, owner: Caller,
                                   tree: dict[str, str]) -> None:
    eve = member(svc, "eve")
    mine = svc.create_memory(eve, {"name": "Eve's"})["id"]
    svc.remember(eve, mine, {"content": "eve renewal"})
    assert found(svc.recall(eve, mine, {"text": "renewal"})) == ["Eve's"]
    for mid in tree.values():
        with pytest.raises(NotFound):
            svc.recall(eve, mid, {"text": "renewal"})
        with pytest.raises(NotFound):
            svc.graph(eve, mid, {})
    assert [m["id"] for m in svc.list_memories(eve)["data"]] == [mine]
    # The owner does not see Eve's memory either: creation grants nothing upward.
    with pytest.raises(NotFound):
        svc.recall(owner, mine, {"text": "renewal"})
    # A record id never crosses into a memory the caller cannot read.
    acme_rec = svc.recall(owner, tree["acme"], {"text": "march"})["results"][0]["record"]["id"]
    with pytest.raises(NotFound):
        svc.get_record(eve, mine, acme_rec)


def test_filters_grammar(svc: MemoryService, owner: Caller, tree: dict[str, str]) -> None:
    def names(filters: object, **extra: object) -> list[str]:
        return sorted(found(svc.recall(owner, tree["root"], {"filters": filters, "limit": 20,
                                                             **extra})))
    assert names({"field": "attributes.where", "op": "eq", "value": "acme"}) == ["Acme"]
    assert names({"or": [{"field": "attributes.where", "op": "eq", "value": "acme"},
                         {"field": "attributes.where", "op": "in", "value": ["root"]}]}) == [
        "Acme", "Company"]
    assert names({"and": [{"field": "type", "op": "eq", "value": "fact"},
                          {"field": "attributes.where", "op": "contains", "value": "ne"}]}) == [
        "Inner"]
    assert names({"field": "attributes.where", "op": "gte", "value": "sales"}, text="renewal"
                 ) == ["Sales", "Vault"]
    out = svc.recall(owner, tree["root"], {"filters": {"field": "type", "op": "eq",
                                                       "value": "fact"}})
    assert out["results"][0]["why"] == ["filters"] and out["results"][0]["score"] is None
    for bad in ({"field": "content", "op": "eq", "value": 1},
                {"field": "type", "op": "like", "value": 1},
                {"and": []}, {"field": "type", "op": "in", "value": "x"},
                {"field": "type", "op": "eq", "value": {"x": 1}}, "type = fact"):
        with pytest.raises(InvalidInput) as exc:
            svc.recall(owner, tree["root"], {"filters": bad})
        assert exc.value.code == "memory_invalid"


def test_degraded_abstain_and_validation(svc: MemoryService, owner: Caller,
                                         tree: dict[str, str]) -> None:
    out = svc.recall(owner, tree["root"], {"query": "when does acme renew?"})
    assert "query:not_supported" in out["degraded"]
    assert found(out)[0] == "Acme"
    none = svc.recall(owner, tree["root"], {"text": "zebra"})
    assert none["results"] == [] and none["abstain"] is True
    for bad in ({}, {"text": ""}, {"text": "x", "depth": -1}, {"text": "x", "limit": 0},
                {"text": "x", "limit": 101}, {"text": "x", "include": "some"},
                {"text": "x", "types": ["Nope"]}, {"text": "x", "as_of": "noon"},
                {"text": "x", "surprise": 1}):
        with pytest.raises(InvalidInput):
            svc.recall(owner, tree["root"], bad)


def test_hostile_query_text_is_literal(svc: MemoryService, owner: Caller,
                                       tree: dict[str, str]) -> None:
    for text in ('scope : "x" OR', 'text:renewal NEAR(a b)', '"', "*", "^renewal", "a AND",
                 "(", "renewal)", "NOT renewal"):
        out = svc.recall(owner, tree["root"], {"text": text, "limit": 20})
        assert all(r["record"]["memory_id"] in tree.values() for r in out["results"])
    with pytest.raises(InvalidInput):
        svc.recall(owner, tree["root"], {"text": "\x00renewal"})


def test_as_of_recall(svc: MemoryService, owner: Caller, tree: dict[str, str]) -> None:
    rec = svc.recall(owner, tree["acme"], {"text": "march"})["results"][0]["record"]
    before = rec["time"]["written_at"]
    svc.revise(owner, tree["acme"], rec["id"], {"content": "Acme renewal moved to May"})
    assert svc.recall(owner, tree["acme"], {"text": "march"})["results"] == []
    past = svc.recall(owner, tree["acme"], {"text": "march", "as_of": before})
    assert [r["record"]["version"] for r in past["results"]] == [1]


def test_episode_context_finds_the_reply(svc: MemoryService, owner: Caller) -> None:
    chat = svc.create_memory(owner, {"name": "chat"})["id"]
    svc.observe(owner, chat, {"episodes": [
        {"content": "What counseling career is Caroline pursuing?"},
        {"content": "She wants to work with trans youth."},
        {"content": "Unrelated small talk about weather."}]})
    out = svc.recall(owner, chat, {"text": "counseling career", "limit": 5})
    texts = [r["record"]["content"][0]["text"] for r in out["results"]]
    assert texts[0].startswith("What counseling")
    assert "She wants to work with trans youth." in texts  # found through its context
    assert all("weather" not in t for t in texts)
    question = out["results"][0]["record"]["id"]
    svc.erase(owner, chat, {"record_ids": [question]})
    after = svc.recall(owner, chat, {"text": "counseling career", "limit": 5})
    assert after["results"] == []  # the erased words no longer reach the reply either


def test_candidates_carry_thread_and_time(svc: MemoryService, owner: Caller) -> None:
    chat = svc.create_memory(owner, {"name": "chat"})["id"]
    svc.remember(owner, chat, {"type": "episode", "content": "deploy on friday",
                               "attributes": {"session_id": "s-1"},
                               "time": {"valid_from": "2026-05-01T10:00:00Z"}})
    svc.remember(owner, chat, {"content": "deploy checklist", "attributes": {"session_id": 7}})
    hits = svc._store.search(["deploy"], [chat], ("active",), None, 10)
    assert sorted((h.thread or "", h.when is not None) for h in hits) == [("", True),
                                                                          ("s-1", True)]
    assert {h.when for h in hits} >= {"2026-05-01T10:00:00.000000Z"}


def test_a_word_first_seen_after_a_recall_is_found(svc: MemoryService, owner: Caller) -> None:
    mid = svc.create_memory(owner, {"name": "fresh"})["id"]
    assert svc.recall(owner, mid, {"text": "zanzibar"})["results"] == []
    svc.remember(owner, mid, {"content": "zanzibar trip in May"})
    assert len(svc.recall(owner, mid, {"text": "zanzibar"})["results"]) == 1
