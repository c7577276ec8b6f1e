"""The index tokenizer is exactly the §18 tokenizer of palimpsest.text, only faster."""

from __future__ import annotations

import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from palimpsest.hn.index.schema import _ALNUM_RUNS, index_tokens
from palimpsest.text import _is_word_rune, lexical_tokens


def test_fast_runs_cover_every_go_word_rune() -> None:
    # Exhaustive over all code points: the regex may match more, never less.
    missed = [
        cp
        for cp in range(sys.maxunicode + 1)
        if not 0xD800 <= cp <= 0xDFFF
        and _is_word_rune(chr(cp))
        and _ALNUM_RUNS.fullmatch(chr(cp)) is None
    ]
    assert missed == []


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.text())
def test_same_tokens_as_the_reference(text: str) -> None:
    assert index_tokens(text) == lexical_tokens(text)


def test_upstream_vectors() -> None:
    assert index_tokens("Cafe\u0301—東京...🐈 42 42") == ["42", "cafe", "東京"]
    assert index_tokens("RÉSUMÉ, ALPHA!") == index_tokens("Résumé alpha")
    assert index_tokens("snake_case x²½ Ⅻ İstanbul ΑΣ") == lexical_tokens(
        "snake_case x²½ Ⅻ İstanbul ΑΣ"
    )
