"""Recall answers the question however it is asked: with a greeting in front, with a typo,
naming a date instead of words."""

from __future__ import annotations

from palimpsest.service import MemoryService
from palimpsest.service.model import Caller
from tests.conftest import BOTH

BACKENDS = BOTH  # the store is what these tests exercise


def _texts(out: dict[str, object]) -> list[str]:
    return [r["record"]["content"][0]["text"] for r in out["results"]]  # type: ignore[attr-defined,index]


def _chat(svc: MemoryService, owner: Caller) -> str:
    chat = svc.create_memory(owner, {"name": "chat"})["id"]
    svc.observe(owner, chat, {"episodes": [
        {"content": "We booked the Italian restaurant for Friday",
         "attributes": {"session_id": "s-1"}, "time": {"valid_from": "2023-05-05T19:00:00Z"}},
        {"content": "The quick brown fox question", "attributes": {"session_id": "s-2"},
         "time": {"valid_from": "2023-06-01T10:00:00Z"}},
        {"content": "Caroline painted a sunset", "attributes": {"session_id": "s-3"},
         "time": {"valid_from": "2023-07-14T10:00:00Z"}},
        {"content": "Caroline painted a lake", "attributes": {"session_id": "s-4"},
         "time": {"valid_from": "2023-10-13T10:00:00Z"}},
    ]})
    return chat


def test_a_greeting_in_front_does_not_change_the_answer(svc: MemoryService,
                                                        owner: Caller) -> None:
    chat = _chat(svc, owner)
    plain = svc.recall(owner, chat, {"query": "Which restaurant did we book?", "limit": 2})
    padded = svc.recall(owner, chat, {
        "query": "Hey, quick question: which restaurant did we book?", "limit": 2})
    assert _texts(plain) == _texts(padded) == ["We booked the Italian restaurant for Friday"]


def test_a_misspelled_word_finds_the_word_the_memory_holds(svc: MemoryService,
                                                           owner: Caller) -> None:
    chat = _chat(svc, owner)
    out = svc.recall(owner, chat, {"query": "which restuarant did we book", "limit": 1})
    assert _texts(out) == ["We booked the Italian restaurant for Friday"]
    two = svc.recall(owner, chat, {"query": "Carolinne paintd", "limit": 5})
    assert sorted(_texts(two)) == ["Caroline painted a lake", "Caroline painted a sunset"]


def test_a_correction_never_reaches_outside_the_memories_searched(svc: MemoryService,
                                                                  owner: Caller) -> None:
    chat = _chat(svc, owner)
    other = svc.create_memory(owner, {"name": "other"})["id"]
    svc.remember(owner, other, {"content": "the zeppelin landed"})
    assert svc.recall(owner, chat, {"query": "zepelin", "limit": 5})["results"] == []
    assert _texts(svc.recall(owner, other, {"query": "zepelin"})) == ["the zeppelin landed"]


def test_a_named_date_favours_what_was_written_then(svc: MemoryService,
                                                   owner: Caller) -> None:
    chat = _chat(svc, owner)
    on_day = svc.recall(owner, chat, {
        "query": "What did Caroline paint on October 13, 2023?", "limit": 2})
    assert _texts(on_day)[0] == "Caroline painted a lake"
    in_month = svc.recall(owner, chat, {"query": "what did caroline paint in july", "limit": 2})
    assert _texts(in_month)[0] == "Caroline painted a sunset"


def test_candidates_name_the_episode_before_them_in_their_conversation(
        svc: MemoryService, owner: Caller) -> None:
    chat = svc.create_memory(owner, {"name": "chat"})["id"]
    svc.observe(owner, chat, {"episodes": [
        {"content": "tea first", "attributes": {"session_id": "s-1"}},
        {"content": "tea second", "attributes": {"session_id": "s-1"}},
        {"content": "tea elsewhere", "attributes": {"session_id": "s-2"}}]})
    hits = sorted(svc._store.search(["tea"], [chat], ("active",), None, 10))
    first, second, elsewhere = hits
    assert (first.follows, second.follows, elsewhere.follows) == (None, first.n, None)

