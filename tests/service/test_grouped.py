"""Group commit of concurrent remembers (service/grouped.py): one transaction for several
writes must still give each write its own changeset, its own CAS step on refs/shared/main, its
own idempotency and its own outcome, return only what is durable, and never let one write's
failure lose or mix up another's."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from palimpsest.errors import InvalidInput, PalError
from palimpsest.service import MemoryService
from palimpsest.service.grouped import RememberCall
from palimpsest.service.memorygit.reviewed import ReviewedWrites
from palimpsest.service.memorygit.wiring import open_flow
from palimpsest.service.model import SHARED_MAIN, Caller
from palimpsest.service.ops import records
from tests.conftest import BOTH
from tests.service.conftest import member

BACKENDS = BOTH  # the store is what these tests exercise


def _chain(svc: MemoryService, memory_id: str) -> list[dict[str, Any]]:
    """Changesets of refs/shared/main from the first to the head, following parent_ids."""
    store = svc._store
    ref = store.ref(memory_id, SHARED_MAIN)
    out: list[dict[str, Any]] = []
    head = ref.head if ref else None
    while head:
        cs = store.changeset(head)
        assert cs is not None
        out.append(cs.to_wire())
        head = cs.parent_ids[0] if cs.parent_ids else None
    return out[::-1]


def _records(svc: MemoryService, caller: Caller, memory_id: str) -> dict[str, Any]:
    page = svc.list_records(caller, memory_id, limit=200)
    return {r["id"]: r for r in page["data"]}


def test_group_gives_each_write_its_own_changeset_in_order(svc: MemoryService,
                                                           owner: Caller) -> None:
    mid = svc.create_memory(owner, {"name": "m"})["id"]
    before = len(_chain(svc, mid))
    calls = [RememberCall(owner, mid, {"content": f"note {i}"}, f"key-{i}") for i in range(6)]
    outcomes = svc.remember_many(calls)
    assert all(isinstance(o, dict) for o in outcomes), outcomes
    chain = _chain(svc, mid)[before:]
    # one changeset per write, each on the head the previous write left (CAS order)
    assert [c["idempotency_key"] for c in chain] == [f"key-{i}" for i in range(6)]
    assert len({c["changeset_id"] for c in chain}) == 6
    for earlier, later in itertools.pairwise(chain):
        assert later["parent_ids"] == [earlier["changeset_id"]]
    stored = _records(svc, owner, mid)
    for i, outcome in enumerate(outcomes):
        assert isinstance(outcome, dict)
        assert outcome["content"] == [{"type": "text", "text": f"note {i}"}]
        assert stored[outcome["id"]] == outcome  # what was answered is what is stored
    # each key replays its own first answer, alone or grouped again
    again = svc.remember_many(calls[:3])
    assert again == outcomes[:3]
    assert svc.remember(owner, mid, {"content": "note 4"}, idempotency_key="key-4") \
        == outcomes[4]


def test_refusals_in_a_group_are_each_writes_own(svc: MemoryService, owner: Caller) -> None:
    mid = svc.create_memory(owner, {"name": "m"})["id"]
    stranger = member(svc, "stranger")
    first = svc.remember(owner, mid, {"content": "first"}, idempotency_key="used")
    calls = [
        RememberCall(owner, mid, {"content": "ok 1"}, "a"),
        RememberCall(owner, "hmem_nosuchmemory", {"content": "nowhere"}, "b"),
        RememberCall(owner, mid, {"content": "ok 2"}, "c"),
        RememberCall(owner, mid, {"content": 5}, "d"),  # not a valid body
        RememberCall(stranger, mid, {"content": "not mine"}, "e"),  # sees nothing here
        RememberCall(owner, mid, {"content": "other"}, "used"),  # key reused, other body
        RememberCall(owner, mid, {"content": "first"}, "used"),  # a true replay
        RememberCall(owner, mid, {"content": "ok 3"}, None),
    ]
    outcomes = svc.remember_many(calls)
    # Each refusal is exactly what the write alone gets.
    for call, outcome in zip(calls, outcomes, strict=True):
        if isinstance(outcome, Exception):
            with pytest.raises(PalError) as alone:
                svc.remember(call.caller, call.memory_id, call.body,
                             idempotency_key=call.idempotency_key)
            assert isinstance(outcome, PalError)
            assert (outcome.code, str(outcome)) == (alone.value.code, str(alone.value))
    codes = [o.code if isinstance(o, PalError) else None for o in outcomes]
    assert codes == [None, "memory_not_found", None, "memory_invalid", "memory_not_found",
                     "idempotency_mismatch", None, None]
    assert outcomes[6] == first
    stored = _records(svc, owner, mid)
    texts = sorted(r["content"][0]["text"] for r in stored.values())
    assert texts == ["first", "ok 1", "ok 2", "ok 3"]  # nothing lost, nothing extra
    keys = [c["idempotency_key"] for c in _chain(svc, mid)]
    assert keys[:4] == ["used", "a", "c", keys[3]] and keys[3].startswith("auto-")


@pytest.mark.parametrize("failure", ["unexpected error before writing",
                                     "refusal after the write's rows were written"])
def test_a_failing_group_is_rolled_back_and_each_write_runs_alone(
        svc: MemoryService, owner: Caller, monkeypatch: pytest.MonkeyPatch,
        failure: str) -> None:
    """The failure is injected into the third write of the group only (the writes run again
    alone are the real path): nothing of the group may stay, and each write lands once."""
    mid = svc.create_memory(owner, {"name": "m"})["id"]
    calls = [RememberCall(owner, mid, {"content": f"n{i}"}, f"k{i}") for i in range(4)]
    real = records.remember
    count = 0

    def third_fails(*args: Any, **kwargs: Any) -> Any:
        nonlocal count
        count += 1
        if count == 3 and failure.startswith("unexpected"):
            raise RuntimeError(failure)
        result = real(*args, **kwargs)
        if count == 3:
            raise InvalidInput(failure)  # after its rows changed: cannot be undone alone
        return result

    monkeypatch.setattr(records, "remember", third_fails)
    outcomes = svc.remember_many(calls)
    assert count == 3 + len(calls)  # the group got to its third write, then each ran alone
    assert all(isinstance(o, dict) for o in outcomes), outcomes
    stored = _records(svc, owner, mid)
    assert sorted(r["content"][0]["text"] for r in stored.values()) == ["n0", "n1", "n2", "n3"]
    assert [c["idempotency_key"] for c in _chain(svc, mid)] == ["k0", "k1", "k2", "k3"]
    assert svc.rebuild()["equal"] is True


def test_outcomes_are_durable_when_returned(tmp_path: Path, svc: MemoryService,
                                            owner: Caller) -> None:
    mid = svc.create_memory(owner, {"name": "m"})["id"]
    outcomes = svc.remember_many(
        [RememberCall(owner, mid, {"content": f"d{i}"}, f"d{i}") for i in range(5)])
    # Another connection (as another process would) sees every acknowledged write at once.
    with MemoryService(tmp_path / "data", database=getattr(svc._store, "url", None)) as other:
        seen = _records(other, other.caller(owner.member.id), mid)
    assert {o["id"] for o in outcomes if isinstance(o, dict)} == set(seen)
    assert len(seen) == 5


def test_a_write_into_a_reviewed_memory_is_not_grouped(svc: MemoryService,
                                                       owner: Caller) -> None:
    """Memory Git review: an agent's write goes to its own ref as a pending proposal, alone,
    while the writes around it are grouped."""
    mid = svc.create_memory(owner, {"name": "reviewed"})["id"]
    agent = member(svc, "agent-1")
    svc.put_grant(owner, mid, {"principal": f"member:{agent.member.id}",
                               "privileges": ["read", "write"]})
    ReviewedWrites(open_flow(svc)).put_settings(f"member:{owner.member.id}", mid,
                                                {"review_required": True})
    outcomes = svc.remember_many([
        RememberCall(owner, mid, {"content": "accepted"}, "o1"),
        RememberCall(agent, mid, {"content": "proposed"}, "a1"),
        RememberCall(owner, mid, {"content": "accepted too"}, "o2"),
    ])
    assert isinstance(outcomes[1], dict)
    assert outcomes[1]["object"] == "memory.pending_review"
    stored = _records(svc, owner, mid)
    assert sorted(r["content"][0]["text"] for r in stored.values()) == ["accepted",
                                                                        "accepted too"]
