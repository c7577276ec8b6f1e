"""The service thread (api/runtime.Runner): remembers that queue up while it is busy are handed
to the service together, each caller gets its own answer or its own error, and the other calls
keep their order around the group."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from palimpsest.api.runtime import Runner
from palimpsest.errors import NotFound
from palimpsest.service import MemoryService
from palimpsest.service.grouped import RememberCall


class RecordingService(MemoryService):
    """The real service, noting the size of every group it is handed."""

    def __init__(self, data_dir: Path) -> None:
        super().__init__(data_dir)
        self.groups: list[int] = []

    def remember_many(self, calls: Sequence[RememberCall]) -> list[Any]:
        self.groups.append(len(calls))
        return super().remember_many(calls)


def test_queued_remembers_are_grouped_and_answered_each(tmp_path: Path) -> None:
    svc = RecordingService(tmp_path / "data")
    made = svc.bootstrap_owner()
    assert made is not None
    caller = svc.caller(made[0].id)
    mid = svc.create_memory(caller, {"name": "m"})["id"]
    run = Runner()
    gate = threading.Event()
    order: list[str] = []

    async def scenario() -> list[Any]:
        busy = asyncio.ensure_future(run.run(gate.wait, 30))  # holds the service thread
        await asyncio.sleep(0.05)
        writes = [asyncio.ensure_future(run.remember(svc, caller, mid, {"content": f"n{i}"},
                                                     f"k{i}")) for i in range(5)]
        bad = asyncio.ensure_future(run.remember(svc, caller, "hmem_nosuchmemory",
                                                 {"content": "x"}, None))
        after = asyncio.ensure_future(run.run(order.append, "after"))
        await asyncio.sleep(0.05)
        gate.set()
        await busy
        await after
        return await asyncio.gather(*writes, bad, return_exceptions=True)

    try:
        results = asyncio.run(scenario())
    finally:
        run.shutdown()
    assert svc.groups == [6]  # five writes and the refused one, in one group
    assert order == ["after"]
    answers, refused = results[:5], results[5]
    assert [a["content"][0]["text"] for a in answers] == [f"n{i}" for i in range(5)]
    assert isinstance(refused, NotFound)
    listed = svc.list_records(caller, mid)["data"]
    assert sorted(r["id"] for r in listed) == sorted(a["id"] for a in answers)
    svc.close()


def test_runner_restarts_after_shutdown_and_runs_in_order() -> None:
    run = Runner()
    seen: list[int] = []

    async def scenario() -> None:
        await asyncio.gather(*(run.run(seen.append, i) for i in range(20)))

    asyncio.run(scenario())
    run.shutdown()
    asyncio.run(scenario())
    run.shutdown()
    assert seen == list(range(20)) * 2


def test_an_error_reaches_only_its_caller() -> None:
    run = Runner()

    def boom() -> None:
        raise ValueError("only mine")

    async def scenario() -> list[Any]:
        return list(await asyncio.gather(run.run(boom), run.run(sum, [1, 2]),
                                         return_exceptions=True))

    try:
        first, second = asyncio.run(scenario())
    finally:
        run.shutdown()
    assert isinstance(first, ValueError) and str(first) == "only mine"
    assert second == 3


def test_callers_are_served_in_turn() -> None:
    """One caller with many calls queued delays another's call by one of its own, not all."""
    from palimpsest.api.guard import CALLER_KEY

    run = Runner()
    gate = threading.Event()
    order: list[str] = []

    async def queued(key: str, label: str) -> None:
        CALLER_KEY.set(key)  # what the guard sets per request
        await run.run(order.append, label)

    async def scenario() -> None:
        busy = asyncio.ensure_future(run.run(gate.wait, 30))
        await asyncio.sleep(0.05)
        flood = [asyncio.ensure_future(queued("hcred_flood", f"flood{i}")) for i in range(10)]
        await asyncio.sleep(0.05)
        calm = asyncio.ensure_future(queued("hcred_calm", "calm"))
        await asyncio.sleep(0.05)
        gate.set()
        await asyncio.gather(busy, calm, *flood)

    try:
        asyncio.run(scenario())
    finally:
        run.shutdown()
    assert order.index("calm") <= 1  # first-come order would have put it eleventh
    assert [x for x in order if x != "calm"] == [f"flood{i}" for i in range(10)]
