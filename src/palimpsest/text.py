"""Go-compatible text primitives and safe display of untrusted text.

``hn-memory/0`` normalises labels and tokens the way Go's ``strings.TrimSpace`` and
``unicode.ToLower`` do, and Python differs from both (hn-memory-v0.md §26.3): ``str.strip``
also removes U+001C..U+001F, ``str.lower`` maps U+0130 to two code points and applies
final-sigma context.  These functions copy Go per code point.

Display helpers make author text inert on a terminal: no control byte (ESC, CR, BEL, C1) ever
reaches it, and bidirectional or invisible format characters become visible escapes.

Nothing here reads or writes files.
"""

from __future__ import annotations

import re
import unicodedata

# Go unicode.IsSpace: '\t', '\n', '\v', '\f', '\r', ' ', U+0085, U+00A0 and category Z.
_GO_SPACE = frozenset(
    "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
    "\u200a\u2028\u2029\u202f\u205f\u3000"
)
# Category Cc is exactly U+0000..U+001F and U+007F..U+009F; a regex keeps validation hot paths
# free of per-character Python loops.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
_GO_SPACE_CHARS = "".join(sorted(_GO_SPACE))  # str.strip(chars) strips exactly this set, in C
# Go's simple lower-case mapping differs from Python's str.lower() for these code points.
_LOWER_SPECIAL = {"\u0130": "i"}


def trim_space(text: str) -> str:
    """Go ``strings.TrimSpace``: strip leading and trailing Unicode white space."""
    return text.strip(_GO_SPACE_CHARS)


def _lower_rune(char: str) -> str:
    special = _LOWER_SPECIAL.get(char)
    if special is not None:
        return special
    lowered = char.lower()
    return lowered if len(lowered) == 1 else char


def to_lower(text: str) -> str:
    """Go ``strings.ToLower``: simple per-code-point lower-casing, no context rules."""
    if text.isascii():
        return text.lower()
    return "".join(_lower_rune(c) for c in text)


def is_blank(text: str) -> bool:
    """True when nothing is left after :func:`trim_space`."""
    return not trim_space(text)


def has_control(text: str) -> bool:
    """True when ``text`` holds a control code point (category Cc, Go ``unicode.IsControl``)."""
    return _CONTROL.search(text) is not None


def _is_word_rune(char: str) -> bool:
    if char.isascii():
        return char.isalnum()
    return unicodedata.category(char)[0] in "LN"


def word_tokens(text: str) -> list[str]:
    """Split into lower-cased words of letters and numbers (Go ``IsLetter``/``IsNumber``).

    Order and repeats are kept; :func:`lexical_tokens` sorts and de-duplicates.
    """
    words: list[str] = []
    current: list[str] = []
    for char in text:
        if _is_word_rune(char):
            current.append(char)
        elif current:
            words.append(to_lower("".join(current)))
            current = []
    if current:
        words.append(to_lower("".join(current)))
    return words


def lexical_tokens(text: str) -> list[str]:
    """The ``hn-memory/0`` lexical tokenizer (hn-memory-v0.md §18): sorted, unique words."""
    return sorted(set(word_tokens(text)))


REPLACEMENT = "\ufffd"


def safe_text(text: str) -> str:
    """Make author text inert for a terminal.

    Control characters other than LF and TAB become U+FFFD (as upstream ``safeText`` does).
    Format characters (bidi overrides and isolates, zero-width characters, BOM) and the line and
    paragraph separators become visible ``<U+XXXX>`` escapes so they cannot reorder or hide
    what a reader sees.
    """
    out: list[str] = []
    for char in text:
        if char in "\n\t":
            out.append(char)
            continue
        category = unicodedata.category(char)
        if category == "Cc":
            out.append(REPLACEMENT)
        elif category in ("Cf", "Zl", "Zp", "Cs", "Co", "Cn") and not char.isascii():
            out.append(f"<U+{ord(char):04X}>")
        else:
            out.append(char)
    return "".join(out)


def safe_line(text: str) -> str:
    """Like :func:`safe_text` but also escapes LF and TAB, for one-line labels and values."""
    return safe_text(text).replace("\n", "\\n").replace("\t", "\\t")


__all__ = [
    "REPLACEMENT",
    "has_control",
    "is_blank",
    "lexical_tokens",
    "safe_line",
    "safe_text",
    "to_lower",
    "trim_space",
    "word_tokens",
]
