"""Property: the projection kept write by write equals the one rebuilt from the changesets."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from palimpsest.service import MemoryService
from tests.conftest import BOTH

BACKENDS = BOTH  # the store is what these tests exercise

WORDS = st.sampled_from(["acme", "renewal", "march", "email", "bob", "invoice", "late"])
OPS = st.lists(st.one_of(
    st.tuples(st.just("remember"), st.lists(WORDS, min_size=1, max_size=4),
              st.sampled_from(["fact", "episode"])),
    st.tuples(st.just("revise"), st.integers(0, 9), st.lists(WORDS, min_size=1, max_size=4)),
    st.tuples(st.just("forget"), st.integers(0, 9)),
    st.tuples(st.just("erase"), st.integers(0, 9)),
), min_size=1, max_size=14)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(OPS)
def test_rebuild_equals_incremental_projection(ops: list[tuple[object, ...]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        svc = MemoryService(Path(tmp))
        try:
            made = svc.bootstrap_owner()
            assert made is not None
            me = svc.caller(made[0].id)
            mid = svc.create_memory(me, {"name": "m"})["id"]
            ids: list[str] = []
            live: set[str] = set()
            for op in ops:
                if op[0] == "remember":
                    rid = svc.remember(me, mid, {"content": " ".join(op[1]),  # type: ignore[arg-type]
                                                 "type": op[2]})["id"]
                    ids.append(rid)
                    live.add(rid)
                    continue
                if not ids:
                    continue
                rid = ids[int(op[1]) % len(ids)]  # type: ignore[call-overload]
                if rid not in live:
                    continue
                if op[0] == "revise":
                    svc.revise(me, mid, rid, {"content": " ".join(op[2])})  # type: ignore[arg-type]
                elif op[0] == "forget":
                    svc.forget(me, mid, rid)
                else:
                    svc.erase(me, mid, {"record_ids": [rid]})
                    live.discard(rid)

            def state() -> object:
                rows = svc.list_records(me, mid, include="all", limit=200)["data"]
                return (rows, [svc.record_history(me, mid, r["id"]) for r in rows],
                        svc.get_memory(me, mid)["records"],
                        [svc.recall(me, mid, {"text": w, "limit": 50, "include": "all"})
                         ["results"] for w in ("acme", "march", "late")])

            before = state()
            assert {r["id"] for r in before[0]} == live  # type: ignore[index]
            svc.rebuild()
            assert state() == before
        finally:
            svc.close()
