"""Go TrimSpace, ToLower and tokens; inert terminal display (hn-memory-v0.md §18, §26)."""

from __future__ import annotations

import pytest

from palimpsest.text import (
    REPLACEMENT,
    has_control,
    is_blank,
    lexical_tokens,
    safe_line,
    safe_text,
    to_lower,
    trim_space,
    word_tokens,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (" \t\n\v\f\r x \r\n", "x"), ("\x85\xa0x\u3000\u2028", "x"), ("\u1680x\u205f", "x"),
        ("\x1cx\x1f", "\x1cx\x1f"),  # Go does not trim U+001C..U+001F; Python's strip does
        ("\u200bx", "\u200bx"),  # zero-width space is not white space
        ("", ""), ("   ", ""),
    ],
)  # fmt: skip
def test_trim_space_matches_go(text: str, expected: str) -> None:
    assert trim_space(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ABC", "abc"), ("İ", "i"), ("ΑΣ", "ασ"), ("ΣΑΣ", "σασ"), ("Résumé", "résumé"),
        ("ẞ", "ß"), ("ǅ", "ǆ"), ("東京", "東京"), ("ﬀ", "ﬀ"), ("K", "k"),
    ],
)  # fmt: skip
def test_to_lower_is_per_rune(text: str, expected: str) -> None:
    assert to_lower(text) == expected
    assert len(to_lower(text)) == len(text)


def test_upstream_token_vectors() -> None:
    assert lexical_tokens("Cafe\u0301—東京...🐈 42 42") == ["42", "cafe", "東京"]
    assert lexical_tokens("RÉSUMÉ, ALPHA!") == lexical_tokens("Résumé alpha")
    assert lexical_tokens("Ⅻ ½ x²") == ["x²", "½", "ⅻ"]  # Nl and No continue words
    assert word_tokens("a-b a") == ["a", "b", "a"]
    assert lexical_tokens("") == [] and lexical_tokens("!!!") == []


def test_blank_and_control() -> None:
    assert is_blank(" \u3000\n") and not is_blank(" x ")
    assert has_control("a\x00") and has_control("\x7f") and has_control("\x85")
    assert not has_control("a\u200b é")


def test_safe_text_neutralises_terminal_controls() -> None:
    hostile = "ok\x1b[31mred\x07\r\x00\x9b\u202e\u2066\u200b\ufeff\u2028\n\tend"
    shown = safe_text(hostile)
    assert not any(ord(c) < 32 and c not in "\n\t" for c in shown)
    assert "\x7f" not in shown and "\x9b" not in shown
    assert shown.count(REPLACEMENT) == 5
    for code in ("202E", "2066", "200B", "FEFF", "2028"):
        assert f"<U+{code}>" in shown
    assert shown.endswith("\n\tend")
    assert safe_line("a\nb\tc\x1b") == f"a\\nb\\tc{REPLACEMENT}"
    assert safe_text("é 東京 🐈") == "é 東京 🐈"
