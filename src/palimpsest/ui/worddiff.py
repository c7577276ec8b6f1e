"""Word-level and per-field diffs for the review desk — pure functions over values.

A diff is a list of :class:`Piece` values (``same``, ``del`` or ``ins`` plus the text), which
the templates render as text inside ``<del>``/``<ins>``; nothing here produces HTML, so author
text is escaped by the template engine like every other value.

Words are runs of non-space characters; the spaces between them are kept with the word before,
so joining the pieces of either side gives back that side exactly.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any

from palimpsest import canonical

_WORD = re.compile(r"\S+\s*|\s+")
MAX_WORDS = 20_000  # beyond this a side is compared as one piece (difflib is quadratic)


@dataclass(frozen=True, slots=True)
class Piece:
    """A run of text that both sides share (``same``), or only the old (``del``) or new
    (``ins``) side has."""

    kind: str
    text: str


@dataclass(frozen=True, slots=True)
class FieldDiff:
    """One field of a record or an op: its name, both values as text and their word diff."""

    name: str
    before: str | None
    after: str | None
    pieces: tuple[Piece, ...]

    @property
    def changed(self) -> bool:
        """Whether the two sides differ."""
        return self.before != self.after


def words(text: str) -> list[str]:
    """Split ``text`` into words, each with the white space that follows it."""
    return _WORD.findall(text)


def word_diff(before: str, after: str) -> tuple[Piece, ...]:
    """The word-level diff from ``before`` to ``after`` (adjacent pieces of one kind merged)."""
    old, new = words(before), words(after)
    if len(old) > MAX_WORDS or len(new) > MAX_WORDS:
        raw = [Piece("same", before)] if before == after else [
            Piece("del", before), Piece("ins", after)]
        return tuple(p for p in raw if p.text)
    out: list[Piece] = []
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            _push(out, "same", "".join(old[i1:i2]))
            continue
        if tag in ("delete", "replace"):
            _push(out, "del", "".join(old[i1:i2]))
        if tag in ("insert", "replace"):
            _push(out, "ins", "".join(new[j1:j2]))
    return tuple(out)


def _push(out: list[Piece], kind: str, text: str) -> None:
    if not text:
        return
    if out and out[-1].kind == kind:
        out[-1] = Piece(kind, out[-1].text + text)
    else:
        out.append(Piece(kind, text))


def as_text(value: Any) -> str | None:
    """A field value as the text a diff compares: strings as they are, anything else as
    canonical JSON; ``None`` stays ``None`` (the field is absent on that side)."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    return canonical.encode(value).decode("utf-8")


def field_diff(name: str, before: Any, after: Any) -> FieldDiff:
    """Compare one field across two sides."""
    old, new = as_text(before), as_text(after)
    return FieldDiff(name, old, new, word_diff(old or "", new or ""))


def fields_diff(before: dict[str, Any], after: dict[str, Any],
                first: tuple[str, ...] = ("title", "content")) -> list[FieldDiff]:
    """Every field of either side, ``first`` ones leading, the rest sorted by name."""
    names = [n for n in first if n in before or n in after]
    names += sorted((set(before) | set(after)) - set(names))
    return [field_diff(n, before.get(n), after.get(n)) for n in names]


__all__ = ["MAX_WORDS", "FieldDiff", "Piece", "as_text", "field_diff", "fields_diff",
           "word_diff", "words"]
