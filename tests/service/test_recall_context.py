"""Recall of conversations: an episode's context stays in its conversation, and a question
naming a moment ("two weeks ago") is answered from the service clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from palimpsest.service import MemoryService
from palimpsest.service.model import Caller
from tests.conftest import BOTH
from tests.service.conftest import FakeClock

BACKENDS = BOTH  # the store is what these tests exercise


def _texts(out: dict[str, object]) -> list[str]:
    return [r["record"]["content"][0]["text"] for r in out["results"]]  # type: ignore[attr-defined,index]


def _episode(text: str, session: str | None) -> dict[str, object]:
    body: dict[str, object] = {"content": text}
    if session is not None:
        body["attributes"] = {"session_id": session}
    return body


def test_first_turn_of_a_conversation_takes_no_context_from_the_last(
        svc: MemoryService, owner: Caller) -> None:
    chat = svc.create_memory(owner, {"name": "chat"})["id"]
    svc.observe(owner, chat, {"episodes": [
        _episode("Caroline is pursuing a counseling career", "s-1"),
        _episode("The weather is nice today", "s-2")]})
    out = svc.recall(owner, chat, {"text": "counseling career", "limit": 5})
    assert _texts(out) == ["Caroline is pursuing a counseling career"]


def test_without_conversations_the_previous_episode_is_still_context(
        svc: MemoryService, owner: Caller) -> None:
    chat = svc.create_memory(owner, {"name": "chat"})["id"]
    svc.observe(owner, chat, {"episodes": [
        _episode("Caroline is pursuing a counseling career", None),
        _episode("She wants to work with trans youth", None)]})
    out = svc.recall(owner, chat, {"text": "counseling career", "limit": 5})
    assert _texts(out) == ["Caroline is pursuing a counseling career",
                           "She wants to work with trans youth"]


def test_erase_relinks_context_only_within_the_conversation(
        svc: MemoryService, owner: Caller) -> None:
    chat = svc.create_memory(owner, {"name": "chat"})["id"]
    svc.observe(owner, chat, {"episodes": [
        _episode("Caroline is pursuing a counseling career", "s-1"),
        _episode("Remind me about the dentist", "s-2"),
        _episode("Sure, on Monday", "s-2")]})
    dentist = svc.recall(owner, chat, {"text": "dentist", "limit": 5})
    assert _texts(dentist) == ["Remind me about the dentist", "Sure, on Monday"]
    svc.erase(owner, chat, {"record_ids": [dentist["results"][0]["record"]["id"]]})
    # "Sure, on Monday" lost its context; the turn before it is in another conversation.
    assert svc.recall(owner, chat, {"text": "dentist", "limit": 5})["results"] == []
    out = svc.recall(owner, chat, {"text": "counseling career", "limit": 5})
    assert _texts(out) == ["Caroline is pursuing a counseling career"]


def test_a_named_moment_is_counted_back_from_the_service_clock(
        svc: MemoryService, owner: Caller, clock: FakeClock) -> None:
    now = datetime.fromtimestamp(clock.now / 1000, UTC)
    chat = svc.create_memory(owner, {"name": "chat"})["id"]
    for days, session in ((40, "s-old"), (14, "s-two-weeks"), (2, "s-new")):
        when = (now - timedelta(days=days)).strftime("%Y-%m-%dT%H:%M:%SZ")
        svc.observe(owner, chat, {"episodes": [
            {"content": f"I baked bread ({session})", "attributes": {"session_id": session},
             "time": {"valid_from": when}}]})
    out = svc.recall(owner, chat, {"query": "What did I bake two weeks ago?", "limit": 3})
    assert _texts(out)[0] == "I baked bread (s-two-weeks)"
    clock.tick(26 * 24 * 3600 * 1000)  # 26 days on, s-new was written four weeks ago
    out = svc.recall(owner, chat, {"query": "What did I bake four weeks ago?", "limit": 3})
    assert _texts(out)[0] == "I baked bread (s-new)"
