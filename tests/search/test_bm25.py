"""BM25 computed from reach statistics equals FTS5's own bm25() given the same statistics."""

from __future__ import annotations

import sqlite3

import pytest

from palimpsest.search import bm25, fts
from palimpsest.search.analyzer import query_terms

ROWS = [
    ("We adopted a puppy named Max last spring", "Where did the puppy come from?"),
    ("Max Max Max Max Max", ""),
    ("The shelter where we adopted the puppy was in Boston", "We adopted a puppy"),
    ("Nothing related at all, just a long sentence about the weather in spring", ""),
    ("我爱東京 tower and the puppy", "東京"),
    ("", "context only: the puppy shelter"),
]


def _table() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(text, context, "
                 f"tokenize='{fts.FTS5_TOKENIZE}')")
    conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'row')")
    for i, (text, context) in enumerate(ROWS, start=1):
        conn.execute("INSERT INTO t(rowid, text, context) VALUES (?,?,?)",
                     (i, fts.document_text(text), fts.document_text(context)))
    return conn


def _statistics(conn: sqlite3.Connection, terms: list[str]) -> bm25.Statistics:
    docs = conn.execute("SELECT text, context FROM t").fetchall()
    total = sum(len(a.split()) + len(b.split()) for a, b in docs)
    df: dict[str, int] = {}
    for term in terms:
        expr = fts.match_terms([term])
        assert expr is not None
        df[term] = conn.execute("SELECT count(*) FROM t WHERE t MATCH ?", (expr,)).fetchone()[0]
    return bm25.Statistics(len(docs), total, df)


@pytest.mark.parametrize("question", ["adopted puppy Boston", "max", "puppy spring weather",
                                      "東京 puppy", "shelter", "nothing matches zzz puppy"])
def test_scores_equal_fts5_bm25_with_the_same_statistics(question: str) -> None:
    conn = _table()
    terms = query_terms(question)
    expr = fts.match_terms(terms)
    rows = conn.execute(
        f"SELECT rowid, -bm25(t, 1.0, {fts.CONTEXT_WEIGHT}), text, context FROM t "  # noqa: S608
        "WHERE t MATCH ? ORDER BY rowid", (expr,)).fetchall()
    assert rows
    stats = _statistics(conn, terms)
    got = bm25.scores(dict.fromkeys(terms, 1.0), [bm25.Document(r[2], r[3]) for r in rows],
                      stats)
    assert got == pytest.approx([r[1] for r in rows], rel=1e-9)


def test_weights_scale_a_terms_share_and_zero_drops_it() -> None:
    conn = _table()
    stats = _statistics(conn, ["puppy", "boston"])
    doc = [bm25.Document(fts.document_text(ROWS[2][0]))]
    full = bm25.scores({"puppy": 1.0, "boston": 1.0}, doc, stats)[0]
    half = bm25.scores({"puppy": 1.0, "boston": 0.5}, doc, stats)[0]
    none = bm25.scores({"puppy": 1.0, "boston": 0.0}, doc, stats)[0]
    boston = bm25.scores({"boston": 1.0}, doc, stats)[0]
    assert none == pytest.approx(full - boston)
    assert half == pytest.approx(full - boston / 2)


def test_statistics_decide_and_nothing_else() -> None:
    # The same candidate scores differently only when the searched records differ: a
    # caller's ranking depends on its reach's counts, not on a store-wide table.
    doc = [bm25.Document("puppy shelter"), bm25.Document("puppy puppy")]
    small = bm25.Statistics(10, 40, {"puppy": 2, "shelter": 1})
    large = bm25.Statistics(10_010, 40_040, {"puppy": 9_000, "shelter": 1})
    a = bm25.scores({"puppy": 1.0, "shelter": 1.0}, doc, small)
    b = bm25.scores({"puppy": 1.0, "shelter": 1.0}, doc, large)
    assert a[0] > a[1] and b[0] > b[1]
    assert a != b
    assert bm25.scores({"puppy": 1.0}, doc, small) == bm25.scores({"puppy": 1.0}, doc, small)
    assert bm25.idf("puppy", large) == bm25.MIN_IDF  # held by most: floored, as FTS5 does
    assert bm25.Statistics(0, 0, {}).average_length == 1.0
