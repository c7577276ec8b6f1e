"""Strings for SQLite FTS5: the analysed text to store, and a safe MATCH expression.

User text is always literal. Every query term is a double-quoted FTS5 string (inner quotes
doubled), so column filters (``title:x``, ``{a b}:x``), operators (``AND``, ``OR``, ``NOT``,
``NEAR``), prefix ``*``, initial-token ``^`` and grouping are plain words, never syntax. The
number of terms is bounded, and a text with no searchable term gives ``None`` rather than an
expression FTS5 would reject.

Both sides go through :func:`palimpsest.search.analyzer.analyze`, so the FTS5 table should
use a tokenizer that splits on spaces and keeps letters and numbers: :data:`FTS5_TOKENIZE`.
The service's storage layer creates the table, stores :func:`document_text` and runs
:func:`match_expression`; this module only builds strings and never opens a database.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from palimpsest.search.analyzer import analyze, query_terms

FTS5_TOKENIZE = "unicode61 remove_diacritics 0"
"""The ``tokenize=`` option for FTS5 tables holding :func:`document_text` output."""

CONTEXT_WEIGHT = 0.5
"""BM25 weight of an episode's ``context`` column (the episode written just before it in the
same memory) relative to 1.0 for its own text. In a conversation the answer is often the turn
after the one that repeats the question's words; a low weight lets that turn rank without
outranking a record that holds the words itself."""

MAX_QUERY_TERMS = 64
"""At most this many distinct terms from a query reach FTS5; the rest are ignored."""

MatchMode = Literal["any", "all"]


def quote_term(term: str) -> str:
    """One FTS5 string literal: ``term`` in double quotes, inner double quotes doubled.

    NUL cannot appear inside an SQLite string passed to FTS5 reliably, so it is dropped.
    """
    return '"' + term.replace("\x00", "").replace('"', '""') + '"'


def document_text(*parts: str) -> str:
    """The analysed form of ``parts`` (joined by spaces) to store in an FTS5 column."""
    return " ".join(analyze(" ".join(parts)))


def match_terms(terms: Iterable[str], mode: MatchMode = "any") -> str | None:
    """A MATCH expression from already-analysed terms, or ``None`` when there are none.

    ``any`` joins the quoted terms with ``OR`` (ranked retrieval: any term may match);
    ``all`` joins them with spaces (FTS5's implicit ``AND``). Terms past
    :data:`MAX_QUERY_TERMS` are dropped.
    """
    quoted: list[str] = []
    for term in terms:
        if not term.replace("\x00", ""):
            continue
        quoted.append(quote_term(term))
        if len(quoted) >= MAX_QUERY_TERMS:
            break
    if not quoted:
        return None
    return (" OR " if mode == "any" else " ").join(quoted)


def match_expression(text: str, mode: MatchMode = "any") -> str | None:
    """A safe FTS5 MATCH expression for user ``text``, or ``None`` if it has no search term.

    The expression matches documents stored with :func:`document_text` that contain any
    (``mode="any"``, the default, for ranked recall) or all (``mode="all"``) of the query's
    terms. It never contains unquoted user text.
    """
    return match_terms(query_terms(text, limit=MAX_QUERY_TERMS), mode)


__all__ = [
    "CONTEXT_WEIGHT",
    "FTS5_TOKENIZE",
    "MAX_QUERY_TERMS",
    "MatchMode",
    "document_text",
    "match_expression",
    "match_terms",
    "quote_term",
]
