"""Topic and term filters through the index's FTS5 postings and row keys.

Every filtered page must equal the unfiltered walk of ``rows`` (a different code path) filtered
in Python by the record's own topics and lexical tokens: same ``matched``, same IDs in §16.4
order across cursor pages, and the same bytes whichever page strategy (sort the matches, or walk
the keys in recall order) the cost estimate picks.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pygit2
import pytest

from palimpsest.hn.author import append, build_record
from palimpsest.hn.envelope import Anchor, PathAnchor
from palimpsest.hn.index import query as index_query
from palimpsest.hn.index.schema import match_query
from palimpsest.hn.recall import recall
from palimpsest.hn.recall.request import normalize_request
from palimpsest.identity import Identity
from palimpsest.text import lexical_tokens
from tests.hn.recall_helpers import commit_files, head, lifecycle, new_repo, remember

LONG_WORD = "x" * 40  # longer than 32 bytes: posted under its hash
LONG_TOPIC = "a-very-long-topic-label-that-is-over-32-bytes"
WORDS = ["alpha", "beta", "gamma", "delta", "café", "東京", LONG_WORD]
TOPICS = ["a", "b", "c", LONG_TOPIC]


@pytest.fixture(scope="module")
def world(
    tmp_path_factory: pytest.TempPathFactory, alice: Identity, bob: Identity
) -> pygit2.Repository:
    rng = random.Random(7)
    repo = new_repo(tmp_path_factory.mktemp("postings") / "repo", trusted=[alice])
    made: list[str] = []
    for i in range(48):
        who = alice if rng.random() < 0.75 else bob
        words = [*rng.sample(WORDS, rng.randint(1, 3)), f"w{i}"] + ["zeta"] * (i % 2)
        topics = tuple(sorted(rng.sample(TOPICS, rng.randint(0, 2))))
        memory = remember(
            repo, who, " ".join(words).capitalize(), kind=rng.choice(["observation", "decision"]),
            topics=topics, timestamp=f"2026-09-01T12:00:{i // 4:02d}Z",  # ties on purpose
        )  # fmt: skip
        if who is alice:
            made.append(memory.memory_id)
    for target in rng.sample(made, 6):
        lifecycle(repo, alice, "retract", target, timestamp="2026-09-01T13:00:00Z")
    return repo


def _pages(repo: pygit2.Repository, **flags: Any) -> tuple[int, list[str], list[bytes]]:
    cursor, ids, pages, matched = "", [], [], -1
    while True:
        result = recall(repo, normalize_request(at_commit=head(repo), max_records=3,
                                                cursor=cursor, **flags))  # fmt: skip
        pages.append(result.to_json())
        matched = result.matched
        ids += [json.loads(r)["id"] for r in result.records]
        cursor = result.next_cursor
        if not cursor:
            return matched, ids, pages


def _expected(repo: pygit2.Repository, **flags: Any) -> list[str]:
    topics = set(flags.pop("topic", ()))
    terms = set(lexical_tokens(flags.pop("query", "")))
    everything = recall(repo, normalize_request(at_commit=head(repo), max_records=10_000, **flags))
    out = []
    for raw in everything.records:
        record = json.loads(raw)
        mine = set(record["data"]["topics"] or ())
        text = record["data"]["content"] + "\n" + "\n".join(record["data"]["topics"] or ())
        if topics <= mine and terms <= set(lexical_tokens(text)):
            out.append(record["id"])
    return out


REQUESTS = [
    {"topic": ["a"]},
    {"topic": ["a", "b"]},
    {"topic": [LONG_TOPIC]},
    {"query": "alpha"},
    {"query": "alpha beta"},
    {"query": "CAFÉ"},
    {"query": "東京 gamma"},
    {"query": LONG_WORD},
    {"query": "alpha", "topic": ["c"]},
    {"topic": ["a"], "kind": ["decision"]},
    {"topic": ["b"], "lifecycle": ["all"]},
    {"topic": ["b"], "lifecycle": ["active", "retracted"]},
    {"query": "beta", "include_untrusted": True},
    {"query": "beta", "trust": ["actor-untrusted"]},
    {"topic": ["nowhere"]},
    {"query": "alpha nowhere"},
    {"query": "zeta"},
    {"query": "zeta", "actor": ["BOB"], "include_untrusted": True},  # keys joined, not ranges
    {"topic": ["a"], "kind": ["decision", "observation"], "lifecycle": ["all"]},
    {"query": "zeta", "lifecycle": ["all"], "include_untrusted": True},
]


@pytest.mark.parametrize("flags", REQUESTS, ids=[json.dumps(r) for r in REQUESTS])
def test_filtered_pages_equal_the_filtered_walk(
    world: pygit2.Repository, monkeypatch: pytest.MonkeyPatch, bob: Identity, flags: dict[str, Any]
) -> None:
    if "actor" in flags:
        flags = {**flags, "actor": [bob.actor]}
    expected = _expected(world, **dict(flags))
    answers = []
    real = index_query._walk_budget
    # Always sort the matches; walk the keys whenever it can; walk on a budget of a few VM
    # instructions (every walk is interrupted and the matches are sorted instead).
    for cost, cap in ((0, None), (10**9, None), (10**9, 3)):
        monkeypatch.setattr(index_query, "_WALK_COST", cost)
        monkeypatch.setattr(index_query, "_TICK", 1000 if cap is None else 1)
        budget = real if cap is None else (lambda *a, c=cap: min(real(*a), c))
        monkeypatch.setattr(index_query, "_walk_budget", budget)
        matched, ids, pages = _pages(world, **flags)
        assert matched == len(expected)
        assert ids == expected
        answers.append(pages)
    assert answers[0] == answers[1] == answers[2]


def test_the_estimate_picks_both_strategies(
    world: pygit2.Repository, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The estimate picks a walk for a common filter and a sort for a rare one.
    chosen: list[bool] = []
    real = index_query._walk_budget

    def spy(*args: Any) -> int:
        budget = real(*args)
        chosen.append(budget > 0)
        return budget

    monkeypatch.setattr(index_query, "_walk_budget", spy)
    recall(world, normalize_request(at_commit=head(world), query="zeta", max_records=1))
    recall(world, normalize_request(at_commit=head(world), query="w5", max_records=20))
    assert chosen == [True, False]


def test_long_values_do_not_collide(world: pygit2.Repository) -> None:
    # Two different long words hash to different posting words.
    assert match_query(topics=(), tokens=("y" * 40,), path="", subject="") != (
        match_query(topics=(), tokens=(LONG_WORD,), path="", subject="")
    )
    assert _expected(world, query="y" * 40) == []
    assert _pages(world, query="y" * 40)[:2] == (0, [])


def test_a_walk_over_budget_is_interrupted_and_sorted_instead(
    world: pygit2.Repository, monkeypatch: pytest.MonkeyPatch
) -> None:
    honest = _pages(world, query="zeta")
    outcomes: list[bool] = []
    real = index_query._within

    def spy(*args: Any) -> list[str] | None:
        found = real(*args)
        outcomes.append(found is None)
        return found

    monkeypatch.setattr(index_query, "_within", spy)
    monkeypatch.setattr(index_query, "_TICK", 1)
    monkeypatch.setattr(index_query, "_walk_budget", lambda *a: 3)
    assert _pages(world, query="zeta") == honest
    assert outcomes and all(outcomes)  # every walk gave up
    monkeypatch.setattr(index_query, "_walk_budget", lambda *a: 10**9)
    outcomes.clear()
    assert _pages(world, query="zeta") == honest
    assert outcomes and not any(outcomes)  # and none did with room to finish


def test_path_filter_matches_the_anchor_paths(tmp_path: Path, alice: Identity) -> None:
    repo = new_repo(tmp_path / "repo", trusted=[alice])
    long_path = "docs/" + "a-rather-long-directory-name/" * 2 + "notes.md"  # hashed word
    blobs = {"README.md": b"hello\n", long_path: b"notes\n"}
    commit_files(repo, blobs, "paths")
    made = {}
    for name, paths in (("readme", ("README.md",)), ("long", (long_path,)), ("none", ()),
                        ("both", ("README.md", long_path))):  # fmt: skip
        anchor = Anchor(
            commit=str(repo.head.target),
            paths=tuple(PathAnchor(p, str(repo.create_blob(blobs[p]))) for p in paths),
        )
        record = build_record(
            kind="observation", content=name, anchor=anchor, applies="descendants"
        )
        made[name] = append(repo, alice, operation="record", record=record).memory_id
    for path, names in (("README.md", {"readme", "both"}), (long_path, {"long", "both"}),
                        ("missing.md", set())):  # fmt: skip
        matched, ids, _ = _pages(repo, path=path)
        assert matched == len(names)
        assert set(ids) == {made[n] for n in names}
