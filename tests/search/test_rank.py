"""The recall re-ranker over real FTS5 candidates."""

from __future__ import annotations

import sqlite3

import pytest

from palimpsest.search import bm25, fts, rank

TEXTS = {
    "r1": "We adopted a puppy named Max last spring",
    "r2": "Max Max Max Max Max",  # repeats one query word, says nothing about adoption
    "r3": "The shelter where we adopted the puppy was in Boston",
    "r4": "Nothing related at all",
}


def candidates(query: str) -> list[rank.Candidate]:
    conn = sqlite3.connect(":memory:")
    conn.execute(
        f"CREATE VIRTUAL TABLE t USING fts5(key UNINDEXED, body, tokenize='{fts.FTS5_TOKENIZE}')"
    )
    for key, text in TEXTS.items():
        conn.execute("INSERT INTO t VALUES (?, ?)", (key, fts.document_text(text)))
    expr = fts.match_expression(query)
    assert expr is not None
    rows = conn.execute(
        "SELECT key, -bm25(t), body FROM t WHERE t MATCH ? ORDER BY bm25(t) LIMIT ?",
        (expr, rank.candidate_limit(8)),
    ).fetchall()
    conn.close()
    return [rank.Candidate(k, TEXTS[k], s, analyzed=b) for k, s, b in rows]


def test_rerank_prefers_records_covering_the_question() -> None:
    ranked = rank.rerank("When did we adopt Max the puppy?", candidates("adopt Max puppy"), limit=8)
    keys = [r.key for r in ranked]
    assert keys[0] == "r1"
    assert keys.index("r1") < keys.index("r2")
    assert "r4" not in keys
    assert all(r.why == ("query",) for r in ranked)


def test_rerank_with_and_without_stored_analysis_agree() -> None:
    cands = candidates("adopted puppy Boston")
    plain = [rank.Candidate(c.key, c.text, c.lexical) for c in cands]
    assert rank.rerank("adopted puppy Boston", cands, limit=3) == rank.rerank(
        "adopted puppy Boston", plain, limit=3
    )


def test_rerank_limits_and_empty() -> None:
    assert rank.rerank("x", [], limit=5) == []
    assert rank.rerank("max", candidates("max"), limit=0) == []
    assert len(rank.rerank("max puppy", candidates("max puppy"), limit=1)) == 1


def test_text_signal_is_named_text() -> None:
    ranked = rank.rerank(None, candidates("shelter"), limit=3, text="shelter")
    assert [r.why for r in ranked] == [("text",)]
    assert rank.candidate_limit(8) == rank.DEFAULT_CANDIDATES
    assert rank.candidate_limit(50) == 200


def test_records_of_one_conversation_support_each_other() -> None:
    # Six single-word matches in lexical order a..f; c..f share a conversation. Each of them
    # is lifted by its two best thread-mates, so c, d and e pass the lone best match a; f
    # counts only two mates too (a long conversation does not win by volume) and stays
    # below a, above the lone b.
    threads = {"a": None, "b": None, "c": "s1", "d": "s1", "e": "s1", "f": "s1"}
    cands = [
        rank.Candidate(k, "", 6.0 - i, analyzed="tea", thread=t)
        for i, (k, t) in enumerate(threads.items())
    ]
    expected = ["c", "d", "e", "a", "f", "b"]
    assert (rank.THREAD_WEIGHT, rank.THREAD_K, rank.THREAD_MATES) == (0.3, 5.0, 2)
    assert [r.key for r in rank.rerank("tea", cands, limit=6)] == expected
    # Without threads the lexical order stands.
    plain = [rank.Candidate(c.key, "", c.lexical, analyzed="tea") for c in cands]
    assert [r.key for r in rank.rerank("tea", plain, limit=6)] == ["a", "b", "c", "d", "e", "f"]
    # The thread may come from attributes.session_id instead.
    attrs = [
        rank.Candidate(c.key, "", c.lexical, attributes={"session_id": c.thread}, analyzed="tea")
        for c in cands
    ]
    assert [r.key for r in rank.rerank("tea", attrs, limit=6)] == expected


def test_the_records_beside_a_hit_in_its_conversation_rise(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # "reply" was written right after the best hit "question" in the same conversation;
    # "later" came further on (after a record that matched nothing) and matches the words a
    # little better than the reply.
    cands = [
        rank.Candidate("question", "", 9.0, analyzed="adopt puppi", thread="s1"),
        rank.Candidate("later", "", 2.9, analyzed="puppi", thread="s1", follows="unmatched"),
        rank.Candidate("reply", "", 2.8, analyzed="puppi", thread="s1", follows="question"),
        rank.Candidate("apart", "", 2.7, analyzed="puppi", thread="s2", follows="question"),
    ]
    ranked = [r.key for r in rank.rerank("adopt puppy", cands, limit=4)]
    assert ranked.index("reply") < ranked.index("later")
    # a link into another conversation is no neighbourhood
    alone = [r.key for r in rank.rerank("adopt puppy", cands[3:] + cands[:1], limit=2)]
    assert alone == ["question", "apart"]
    monkeypatch.setattr(rank, "NEIGHBOUR_WEIGHT", 0.0)
    without = [r.key for r in rank.rerank("adopt puppy", cands, limit=4)]
    assert without.index("later") < without.index("reply")


def test_a_correction_counts_less_than_a_word_typed_exactly() -> None:
    # BM25 puts "fixed" (holding only a correction's term) above "exact" (holding the word as
    # typed); the weights decide which of the two the question's coverage lifts over the other.
    cands = [rank.Candidate("other", "over lakes", 1.2, analyzed="over lake"),
             rank.Candidate("fixed", "paint over lakes", 1.1, analyzed="paint over lake"),
             rank.Candidate("exact", "sunset over lakes", 1.0, analyzed="sunset over lake")]

    def order(weights: dict[str, float]) -> list[str]:
        keys = [r.key for r in rank.rerank("sunset paintt lakes", cands, limit=3,
                                           weights=weights)]
        return [k for k in keys if k != "other"]

    assert order({"sunset": 1.0, "paintt": 1.0, "paint": 0.5, "lake": 1.0}) == ["exact", "fixed"]
    assert order({"sunset": 0.5, "paint": 1.0, "lake": 1.0}) == ["fixed", "exact"]


def test_with_reach_statistics_the_bm25_order_is_computed_not_taken() -> None:
    # Given scores (as store-wide FTS5 statistics might give) claim r1 is best for "max";
    # statistics of the searched records make r2 (five times "max") the best.
    cands = [rank.Candidate(c.key, c.text, 100.0 if c.key == "r1" else 1.0, analyzed=c.analyzed)
             for c in candidates("max")]
    assert {c.key for c in cands} == {"r1", "r2"}
    stats = bm25.Statistics(4, 30, {"max": 2})
    taken = rank.rerank("max", cands, limit=2)
    ranked = rank.rerank("max", cands, limit=2, statistics=stats)
    assert [r.key for r in taken] == ["r1", "r2"]
    assert [r.key for r in ranked] == ["r2", "r1"]
    docs = [bm25.Document(c.analyzed or "") for c in cands]
    computed = dict(zip((c.key for c in cands), bm25.scores({"max": 1.0}, docs, stats),
                        strict=True))
    assert computed["r2"] > computed["r1"]
