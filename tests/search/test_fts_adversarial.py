"""Every hostile query in tests/adversarial/fts/ runs against a real FTS5 table without error."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from palimpsest.search.fts import (
    FTS5_TOKENIZE,
    MAX_QUERY_TERMS,
    document_text,
    match_expression,
)

CORPUS = Path(__file__).resolve().parents[1] / "adversarial" / "fts"
CASES = sorted(CORPUS.glob("*.txt"))

DOCS = [
    ("Secret plan", "the plan is secret and nobody knows"),
    ("title", "secret appears only in the body here"),
    ("Start", "start of a NEAR test with AND and OR words"),
    ("東京", "東京タワーは高い"),
    ("xxx", "x" * 200),
]


@pytest.fixture
def db() -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(":memory:")
    conn.execute(f"CREATE VIRTUAL TABLE docs USING fts5(title, body, tokenize='{FTS5_TOKENIZE}')")
    for title, body in DOCS:
        conn.execute(
            "INSERT INTO docs(title, body) VALUES (?, ?)",
            (document_text(title), document_text(body)),
        )
    yield conn
    conn.close()


def run(conn: sqlite3.Connection, text: str) -> list[int]:
    expr = match_expression(text)
    if expr is None:
        return []
    rows = conn.execute(
        "SELECT rowid FROM docs WHERE docs MATCH ? ORDER BY bm25(docs), rowid", (expr,)
    ).fetchall()
    return [row[0] for row in rows]


def test_corpus_is_present() -> None:
    assert len(CASES) >= 30


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_hostile_query_never_raises(db: sqlite3.Connection, path: Path) -> None:
    text = path.read_bytes().decode("utf-8")
    expr = match_expression(text)
    if expr is not None:
        assert expr.count('"') % 2 == 0
        assert expr.count(" OR ") < MAX_QUERY_TERMS
    run(db, text)  # must not raise sqlite3.OperationalError


def test_column_filter_is_literal(db: sqlite3.Connection) -> None:
    # "title:secret" is the two words title and secret, searched in every column: doc 2 has
    # "title" as its title and "secret" in its body, doc 1 has "secret" in both.
    hits = run(db, "title:secret")
    assert set(hits) == {1, 2}
    assert run(db, "{title body}:x") == run(db, "title body x")


def test_star_is_not_a_prefix_query(db: sqlite3.Connection) -> None:
    assert run(db, "sec*") == []  # "sec" is a word of its own here, not a prefix
    assert run(db, "*") == []


def test_operator_words_are_words(db: sqlite3.Connection) -> None:
    # NEAR is an ordinary word in document 3 and in the query.
    assert run(db, "NEAR(") == [3]


def test_cjk_query_is_a_phrase(db: sqlite3.Connection) -> None:
    assert run(db, "東京") == [4]
    assert run(db, "京東") == []  # the same characters in another order are not the phrase


def test_huge_token_is_cut_consistently(db: sqlite3.Connection) -> None:
    assert run(db, "x" * 200_000) == [5]


def test_ten_thousand_tokens_are_bounded() -> None:
    text = " ".join(f"w{i}" for i in range(10_000))
    expr = match_expression(text)
    assert expr is not None
    assert expr.count('"') == 2 * MAX_QUERY_TERMS


def test_all_mode_requires_every_term(db: sqlite3.Connection) -> None:
    expr = match_expression("secret plan", mode="all")
    assert expr == '"secret" "plan"'
    rows = db.execute("SELECT rowid FROM docs WHERE docs MATCH ?", (expr,)).fetchall()
    assert [r[0] for r in rows] == [1]


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.text(max_size=200))
def test_any_text_is_safe(text: str) -> None:
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute(f"CREATE VIRTUAL TABLE docs USING fts5(body, tokenize='{FTS5_TOKENIZE}')")
        conn.execute("INSERT INTO docs(body) VALUES (?)", (document_text(text),))
        expr = match_expression(text)
        if expr is not None:
            rows = conn.execute("SELECT rowid FROM docs WHERE docs MATCH ?", (expr,)).fetchall()
            # A document always matches a query made of its own text.
            assert rows == [(1,)]
    finally:
        conn.close()
