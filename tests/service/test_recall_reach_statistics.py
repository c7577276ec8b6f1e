"""A caller's recall depends only on the memories it searches: 10,000 records written to
another member's memory — holding the caller's query words, so store-wide document counts,
lengths and "too common" cut-offs all move — leave the caller's answers unchanged, order and
scores included (issue 18: ranking statistics computed over the memories being searched)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from palimpsest.service import MemoryService
from palimpsest.service.grouped import RememberCall

from .conftest import member

ANNS = [
    "the boat left the harbour at dawn",
    "we painted the boat blue last summer",
    "the harbour master wants the mooring fee by Friday",
    "dinner at the restaurant by the harbour was booked for eight",
    "a long note about the weather, the tides, the wind, and finally the boat",
    "the restaurant changed its menu",
    "boat boat boat: the children's favourite word",
    "the ferry timetable for the island",
    "mooring lines need replacing before winter",
    "the harbour festival is in June",
]
QUERIES = ["boat", "harbour restaurant", "the boat in the harbour", "mooring fee",
           "restaurant menu", "island ferry", "winter boat"]


def _answers(svc: MemoryService, caller: Any, memory_id: str) -> list[Any]:
    out = []
    for q in QUERIES:
        got = svc.recall(caller, memory_id, {"query": q, "limit": 10})
        out.append((q, [(r["record"]["id"], r["score"], r["why"]) for r in got["results"]],
                    got["degraded"]))
    return out


def test_ten_thousand_records_elsewhere_leave_a_callers_recall_unchanged(
        svc: MemoryService) -> None:
    ann, bob = member(svc, "ann"), member(svc, "bob")
    anns = svc.create_memory(ann, {"name": "Ann's"})["id"]
    bobs = svc.create_memory(bob, {"name": "Bob's"})["id"]
    for text in ANNS:
        svc.remember(ann, anns, {"content": text})
    before = _answers(svc, ann, anns)
    assert all(hits for _, hits, _ in before)  # every query matches something of Ann's
    # Bob's records repeat Ann's query words in every proportion (and are long and short), so
    # store-wide each of them is far past the postings bound and the average length moves.
    words = ["boat", "harbour", "restaurant", "mooring", "fee", "menu", "island", "ferry",
             "winter", "the", "in"]
    for start in range(0, 10_000, 1_000):
        calls = [RememberCall(bob, bobs, {"content": " ".join(
            words[(i + k) % len(words)] for k in range(1 + i % 7)) + f" n{i}"}, None)
            for i in range(start, start + 1_000)]
        assert not [o for o in svc.remember_many(calls) if isinstance(o, Exception)]
    held = svc._store.term_docs(words, [anns, bobs])  # what a store-wide count would say
    assert min(held[w] for w in ("boat", "harbour", "restaurant")) > 1_000
    assert _answers(svc, ann, anns) == before
    # Bob, searching his own memory, sees the words as common: his statistics are his.
    assert svc.recall(bob, bobs, {"query": "boat", "limit": 3})["results"]


def _counted(svc: MemoryService, memory_id: str) -> tuple[int, int]:
    """The reach's statistics counted from the index itself, row by row."""
    db = sqlite3.connect(svc._store._db_path)
    try:
        rows = db.execute("SELECT f.text, f.context FROM record_fts f JOIN records r "
                          "ON r.n = f.rowid JOIN names k ON k.k = r.mem WHERE k.name = ?",
                          (memory_id,)).fetchall()
    finally:
        db.close()
    return len(rows), sum(len(t.split()) + len(c.split()) for t, c in rows)


def test_the_kept_statistics_follow_every_kind_of_write(svc: MemoryService) -> None:
    ann, bob = member(svc, "ann", "human"), member(svc, "bob")
    anns = svc.create_memory(ann, {"name": "Ann's"})["id"]
    bobs = svc.create_memory(bob, {"name": "Bob's"})["id"]
    ids = [svc.remember(ann, anns, {"content": text})["id"] for text in ANNS]
    turns = [svc.remember(ann, anns, {"type": "episode", "content": f"turn {i} about the boat"}
                          )["id"] for i in range(4)]
    svc.remember(bob, bobs, {"content": "bob's own words"})
    assert svc._store.reach_size([anns]) == _counted(svc, anns)
    svc.revise(ann, anns, ids[0], {"content": "the boat left the harbour at noon, not dawn"})
    svc.forget(ann, anns, ids[1])
    svc.erase(ann, anns, {"record_ids": [ids[2]]})
    # the turn after takes the turn before as its context
    svc.erase(ann, anns, {"record_ids": [turns[1]]})
    assert svc._store.reach_size([anns]) == _counted(svc, anns)
    assert svc._store.reach_size([bobs]) == _counted(svc, bobs)
    assert svc._store.reach_size([anns, bobs]) is None  # the whole store: FTS5's own counts
    empty = svc.create_memory(bob, {"name": "Bob's empty"})["id"]
    assert svc._store.reach_size([anns, bobs]) is None  # a memory holding nothing changes nothing
    assert svc._store.reach_size([anns, empty]) == _counted(svc, anns)
    assert svc.rebuild()["equal"] is True
    assert svc._store.reach_size([anns]) == _counted(svc, anns)


def test_a_store_written_before_the_kept_statistics_gains_them_when_opened(
        tmp_path: Path) -> None:
    svc = MemoryService(tmp_path / "data")
    svc.bootstrap_owner("owner")
    ann, bob = member(svc, "ann"), member(svc, "bob")
    anns = svc.create_memory(ann, {"name": "Ann's"})["id"]
    bobs = svc.create_memory(bob, {"name": "Bob's"})["id"]
    svc.remember(bob, bobs, {"content": "bob's own words"})
    for text in ANNS:
        svc.remember(ann, anns, {"content": text})
    want = _counted(svc, anns)
    svc.close()
    db = sqlite3.connect(tmp_path / "data" / "palimpsest.db")
    for name in ("insert", "delete", "update"):
        db.execute(f"DROP TRIGGER record_terms_{name}")
    db.execute("DROP TABLE record_terms")
    db.execute("ALTER TABLE records DROP COLUMN terms")
    db.commit()
    db.close()
    again = MemoryService(tmp_path / "data")
    try:
        assert again._store.reach_size([anns]) == want
        assert again.rebuild()["equal"] is True
    finally:
        again.close()
