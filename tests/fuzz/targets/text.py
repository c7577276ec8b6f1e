"""Fuzz target ``text``: Go-compatible text rules and terminal-safe display (E19, E20).

Input: bytes read as UTF-8 with ``surrogateescape`` (author content, labels and argv alike reach
these functions), handed to every function of :mod:`palimpsest.text`.

Expected refusals: none — these are total functions; anything raising is a finding.

Oracle, each rule checked against an independent statement of it:

- ``trim_space`` strips exactly Go's white space (``\\t \\n \\v \\f \\r``, space, U+0085 and
  categories Zs, Zl, Zp) from both ends; ``is_blank`` is "nothing left after trimming";
- ``to_lower`` maps code point by code point (same length, ASCII as ``bytes.lower``, İ → i) and
  is idempotent;
- ``has_control`` is "holds a category Cc code point";
- ``word_tokens`` are non-empty runs of letters and numbers, lower-cased; ``lexical_tokens`` are
  their sorted unique set;
- ``safe_text`` leaves no control character but LF and TAB and no non-ASCII format, separator,
  surrogate, private-use or unassigned code point and is idempotent; ``safe_line`` leaves
  neither LF nor TAB; the visible letters of the input survive in order.
"""

from __future__ import annotations

import unicodedata

from tests.fuzz.harness import NEVER_RAISES, Refused, Target, check, files, instrumented, texts

with instrumented():
    from palimpsest.text import (
        has_control,
        is_blank,
        lexical_tokens,
        safe_line,
        safe_text,
        to_lower,
        trim_space,
        word_tokens,
    )

_GO_ASCII_SPACE = "\t\n\v\f\r \x85"
_HIDDEN = ("Cf", "Zl", "Zp", "Cs", "Co", "Cn")


def _go_space(char: str) -> bool:
    return char in _GO_ASCII_SPACE or unicodedata.category(char) in ("Zs", "Zl", "Zp")


def _independent_trim(text: str) -> str:
    start, end = 0, len(text)
    while start < end and _go_space(text[start]):
        start += 1
    while end > start and _go_space(text[end - 1]):
        end -= 1
    return text[start:end]


def _call(fn, text):  # type: ignore[no-untyped-def]
    result = NEVER_RAISES.attempt(fn, text)
    assert not isinstance(result, Refused)
    return result


def one_input(data: bytes) -> None:
    text = data.decode("utf-8", "surrogateescape")
    check(_call(trim_space, text) == _independent_trim(text), "trim_space is not Go's TrimSpace")
    check(_call(is_blank, text) == (_independent_trim(text) == ""), "is_blank disagrees")
    lowered = _call(to_lower, text)
    check(len(lowered) == len(text), "to_lower changed the number of code points")
    check(to_lower(lowered) == lowered, "to_lower is not idempotent")
    for before, after in zip(text, lowered, strict=True):
        if before.isascii():
            check(after == before.lower(), "ASCII lower-casing differs")
    check(_call(has_control, text) == any(unicodedata.category(c) == "Cc" for c in text),
          "has_control disagrees with category Cc")  # fmt: skip
    words = _call(word_tokens, text)
    for word in words:
        check(word and all(unicodedata.category(c)[0] in "LN" for c in word), "a token holds a "
              "non-word character")  # fmt: skip
        check(to_lower(word) == word, "a token is not lower-cased")
    check(_call(lexical_tokens, text) == sorted(set(words)), "lexical tokens are not sorted/unique")
    shown = _call(safe_text, text)
    for char in shown:
        category = unicodedata.category(char)
        check(category != "Cc" or char in "\n\t", f"safe_text let {char!r} through")
        check(char.isascii() or category not in _HIDDEN, f"safe_text let {char!r} through")
    check(safe_text(shown) == shown, "safe_text is not idempotent")
    line = _call(safe_line, text)
    check("\n" not in line and "\t" not in line, "safe_line kept a line break or tab")
    visible = [c for c in text if unicodedata.category(c)[0] in "LN"]
    kept = [c for c in shown if unicodedata.category(c)[0] in "LN"]
    check(_subsequence(visible, kept), "safe_text lost or reordered visible text")


def _subsequence(needle: list[str], hay: list[str]) -> bool:
    it = iter(hay)
    return all(any(c == h for h in it) for c in needle)


def seeds() -> list[tuple[str, bytes]]:
    return [
        *files("fuzz/text", "agent_surfaces"),
        *texts("text/literal", [
            " \t\u0085\u00a0 x \u3000\u2028", "\x1c\x1f trims? \x1c", "İSTANBUL ΣΑΣ ǅ ẞ K",
            "\x1b[2J\x1b]52;c;AAAA\x07\x9b31m\r\x08", "\u202eevil\u2066\u2069\u200b\ufeff",
            "\U000e0041\U000e0042 tag chars", "a\udcffb", "\ue000 private \U0010ffff", "١٢٣ ½ ①",
        ]),
    ]  # fmt: skip


TARGET = Target(
    name="text",
    one_input=one_input,
    refusals=NEVER_RAISES,
    seeds=seeds,
    classes=("E19", "E20", "F22"),
    runs=1_500,
    max_len=1024,
    summary="TrimSpace, ToLower, tokenizer, control detection, safe display (palimpsest.text)",
    dictionary=("\u0130".encode(), "\u212a".encode(), "\u202e".encode(), "\u2028".encode(),
                "\x85".encode(), "\u3000".encode(), b"\x1b[", "\u0301".encode(),
                "\U000e0041".encode()),
)

if __name__ == "__main__":
    TARGET.fuzz()
