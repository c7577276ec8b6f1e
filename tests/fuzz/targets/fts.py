"""Fuzz target ``fts``: the FTS5 MATCH builder over a real SQLite FTS5 table (security-tests D18).

Input: the bytes of a recall query as a user types it, read as UTF-8 with ``surrogateescape``
(so undecodable bytes arrive as lone surrogates, as argv does); the same text is also stored as
a document with :func:`palimpsest.search.fts.document_text`.

Expected refusals: none — ``match_expression`` and ``document_text`` must never raise, and the
expression must never make SQLite raise. Anything escaping is a finding.

Oracle: the expression is ``None`` exactly when the text has no index term; otherwise it is one
to 64 double-quoted strings (inner quotes doubled, no NUL) joined by `` OR `` (``any``) or by
spaces (``all``), so no user text is ever FTS5 syntax; it runs against a real FTS5 table without
``sqlite3.Error``; and a document holding the query's own text is found by it in both modes (the
analyser treats stored and query text alike, so nothing is unreachable by its own words).
"""

from __future__ import annotations

import re
import sqlite3

from tests.fuzz.harness import NEVER_RAISES, Refused, Target, check, files, instrumented, texts

with instrumented():
    from palimpsest.search.fts import (
        FTS5_TOKENIZE,
        MAX_QUERY_TERMS,
        document_text,
        match_expression,
    )

_STRING = r'"(?:[^"\x00]|"")*"'
_ANY = re.compile(rf"{_STRING}(?: OR {_STRING})*")
_ALL = re.compile(rf"{_STRING}(?: {_STRING})*")
_DOCS = ("secret plan", "title body", "start NEAR AND OR", "東京タワー", "x" * 200)
_DB = sqlite3.connect(":memory:")
_DB.execute(f"CREATE VIRTUAL TABLE docs USING fts5(body, tokenize='{FTS5_TOKENIZE}')")
for _doc in _DOCS:
    _DB.execute("INSERT INTO docs(body) VALUES (?)", (document_text(_doc),))
_SELF = len(_DOCS) + 1


def _terms(expression: str) -> int:
    return len(re.findall(_STRING, expression))


def one_input(data: bytes) -> None:
    text = data.decode("utf-8", "surrogateescape")
    stored = NEVER_RAISES.attempt(document_text, text)
    assert not isinstance(stored, Refused)
    _DB.execute("SAVEPOINT one")
    try:
        _DB.execute("INSERT INTO docs(rowid, body) VALUES (?, ?)", (_SELF, stored))
        for mode, shape in (("any", _ANY), ("all", _ALL)):
            expression = NEVER_RAISES.attempt(match_expression, text, mode)  # type: ignore[arg-type]
            assert not isinstance(expression, Refused)
            if expression is None:
                check(stored == "", "no MATCH expression for a text that has index terms")
                continue
            check(shape.fullmatch(expression), f"not only quoted terms: {expression[:80]!r}")
            check(1 <= _terms(expression) <= MAX_QUERY_TERMS, "term count out of bounds")
            rows = _DB.execute(  # a sqlite3.Error escaping here is the finding
                "SELECT rowid FROM docs WHERE docs MATCH ? ORDER BY bm25(docs)", (expression,)
            ).fetchall()
            check((_SELF,) in rows, f"a document is not found by its own text ({mode})")
    finally:
        _DB.execute("ROLLBACK TO one")
        _DB.execute("RELEASE one")


def seeds() -> list[tuple[str, bytes]]:
    return [
        *files("fts", "fuzz/fts"),
        *texts("fts/literal", ["café CAFE cafe\u0301", "hiking hikes hiked", "to be or not to be",
                               "देवनागरी", "ﷺ", "½ ① ﬀ", "İstanbul ΣΊΣΥΦΟΣ", "\udcff\udc80 word"]),
    ]  # fmt: skip


TARGET = Target(
    name="fts",
    one_input=one_input,
    refusals=NEVER_RAISES,
    seeds=seeds,
    classes=("D18", "E20", "A2"),
    runs=1_500,
    max_len=1024,
    summary="FTS5 MATCH builder and analyser against a real SQLite FTS5 table",
    dictionary=(b"NEAR(", b" AND ", b" OR ", b" NOT ", b"title:", b"{title body}:", b"^", b"*",
                b'"', b"\x00", "\u202e".encode(), "\u0301".encode(), "東".encode(), "ﷺ".encode()),
)

if __name__ == "__main__":
    TARGET.fuzz()
