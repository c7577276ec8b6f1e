"""Spelling correction looks up the vocabulary of the caller's reach only: a word another
member's memory holds neither counts as held nor is offered as a correction."""

from __future__ import annotations

import pytest

from palimpsest.search import spelling
from palimpsest.service import MemoryService
from palimpsest.service.model import Caller
from tests.conftest import BOTH

from .conftest import member

BACKENDS = BOTH  # the store is what these tests exercise


def _texts(out: dict[str, object]) -> list[str]:
    return [r["record"]["content"][0]["text"] for r in out["results"]]  # type: ignore[attr-defined,index]


def _two_members(svc: MemoryService) -> tuple[Caller, str, Caller, str]:
    ann, bob = member(svc, "ann"), member(svc, "bob")
    anns = svc.create_memory(ann, {"name": "Ann's"})["id"]
    bobs = svc.create_memory(bob, {"name": "Bob's"})["id"]
    return ann, anns, bob, bobs


def test_a_typo_held_only_by_another_member_is_still_corrected(svc: MemoryService) -> None:
    ann, anns, bob, bobs = _two_members(svc)
    svc.remember(bob, bobs, {"content": "We booked the restaurant by the harbour"})
    # Ann's memory happens to hold Bob's typo as a word: store-wide it would count as held,
    # so Bob's misspelling would not be corrected and he would find nothing of his own.
    svc.remember(ann, anns, {"content": "restuarant is how my niece spells it"})
    assert _texts(svc.recall(bob, bobs, {"query": "which restuarant"})) == [
        "We booked the restaurant by the harbour"]
    # Ann's own recall still matches her word exactly
    assert _texts(svc.recall(ann, anns, {"query": "restuarant"})) == [
        "restuarant is how my niece spells it"]


def test_a_correction_only_another_member_holds_is_never_used(svc: MemoryService) -> None:
    ann, anns, bob, bobs = _two_members(svc)
    svc.remember(bob, bobs, {"content": "the boat left at dawn"})
    # "host" shares a longer start with the typo "hoat" than "boat" does: had Ann's words been
    # looked up, "host" would be the only correction and Bob's boat would not be found.
    svc.remember(ann, anns, {"content": "the host of the evening"})
    assert _texts(svc.recall(bob, bobs, {"query": "the hoat"})) == ["the boat left at dawn"]
    assert _texts(svc.recall(ann, anns, {"query": "the hoat"})) == ["the host of the evening"]


def test_the_lookup_counts_within_the_reach(svc: MemoryService) -> None:
    ann, anns, bob, bobs = _two_members(svc)
    svc.remember(ann, anns, {"content": "the host of the evening"})
    svc.remember(ann, anns, {"content": "a host of questions"})
    svc.remember(bob, bobs, {"content": "the boat left, our hosts waved"})
    svc.remember(bob, bobs, {"content": "the boat came back"})
    store = svc._store  # the storage call recall makes
    assert store.term_docs(["host", "boat", "zebra"], [bobs]) == {"host": 1, "boat": 2,
                                                                  "zebra": 0}
    assert store.term_docs(["host", "boat"], [anns]) == {"host": 2, "boat": 0}
    assert store.term_docs(["host"], []) == {"host": 0}
    # the whole store (every memory in reach, and no reach named) counts everything
    every = [m.id for m in store.all_memories()]
    assert anns in every and bobs in every
    assert store.term_docs(["host", "boat"], every) == {"host": 3, "boat": 2}
    assert store.term_docs(["host", "boat"]) == {"host": 3, "boat": 2}
    # what spelling is given: the terms of the reach, most held first among equal starts
    words = [("boot", "boot")]
    for reach, best in (([anns], []), ([bobs], ["boat"]), ([anns, bobs], ["boat"])):
        expansion = spelling.expand(words, lambda ts, r=reach: store.term_docs(list(ts), r))
        assert [t.term for t in expansion.terms if t.corrects == "boot"] == best, reach
    words = [("gost", "gost")]
    for reach, held in (([anns], 2), ([bobs], 1), ([anns, bobs], 3)):
        expansion = spelling.expand(words, lambda ts, r=reach: store.term_docs(list(ts), r))
        assert [t.term for t in expansion.terms if t.corrects == "gost"] == ["host"], reach
        assert expansion.df["host"] == held, reach


@pytest.mark.parametrize("query", ["hoat", "the hoat please"])
def test_a_member_with_an_empty_memory_gets_no_correction(svc: MemoryService,
                                                          query: str) -> None:
    ann, anns, bob, bobs = _two_members(svc)
    svc.remember(ann, anns, {"content": "the host of the evening"})
    out = svc.recall(bob, bobs, {"query": query})
    assert out["results"] == [] and out["abstain"] is True
