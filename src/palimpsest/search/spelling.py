"""Misspelled query words: a word no record in reach holds is matched to its nearest terms.

A question typed in a hurry ("restuarant", "paintng") asks for words the memories do not
hold. :func:`expand` keeps every query term as it is and, for each word whose term no record
in the caller's reach holds, adds the vocabulary terms one edit away (a letter dropped,
added, replaced, or two neighbours swapped — measured on the word before stemming, then
stemmed as stored text is), at most :data:`MAX_CORRECTIONS` of them, the ones most records
hold first, each weighted :data:`CORRECTION_WEIGHT` against 1.0 for an exact term.

The vocabulary is an argument: ``lookup(terms)`` answers how many records *in the reach of
the recall* hold each term (terms it omits hold none). The service passes its own; nothing
here reads storage. Only words of :data:`MIN_WORD_CHARS` to :data:`MAX_WORD_CHARS` ASCII
letters are corrected: shorter ones have too many neighbours to guess from, numbers and
other scripts are left as typed.

Pure: no I/O.
"""

from __future__ import annotations

import string
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

from palimpsest.search.analyzer import FILLER_WORDS, STOP_WORDS, stem

Lookup = Callable[[Collection[str]], Mapping[str, int]]
"""How many records in the recall's reach hold each of the given terms."""

CORRECTION_WEIGHT = 0.5
"""Weight of a correction against 1.0 for a term the question holds exactly."""
MAX_CORRECTIONS = 3
"""At most this many corrections per misspelled word."""
MIN_WORD_CHARS = 4
MAX_WORD_CHARS = 24
_LETTERS = string.ascii_lowercase


@dataclass(frozen=True, slots=True)
class Term:
    """One query term: its analysed form, its weight, and the typed word it corrects (when it
    is a correction)."""

    term: str
    weight: float = 1.0
    corrects: str | None = None


@dataclass(frozen=True, slots=True)
class Expansion:
    """The query terms after correction, and the document frequencies the lookup gave (for the
    exact terms and the corrections alike)."""

    terms: tuple[Term, ...]
    df: Mapping[str, int]

    def names(self) -> list[str]:
        """The distinct analysed terms, exact ones first as typed, then the corrections."""
        return list(dict.fromkeys(t.term for t in self.terms))

    def weights(self) -> dict[str, float]:
        """Each term's weight (the larger when a term is both typed and a correction)."""
        out: dict[str, float] = {}
        for t in self.terms:
            out[t.term] = max(out.get(t.term, 0.0), t.weight)
        return out


def correctable(word: str) -> bool:
    """Whether a typed word is one :func:`expand` tries to correct."""
    return (MIN_WORD_CHARS <= len(word) <= MAX_WORD_CHARS and word.isascii()
            and word.isalpha())


def edits(word: str) -> set[str]:
    """Every string one edit away from ``word`` (drop, swap neighbours, replace, insert)."""
    splits = [(word[:i], word[i:]) for i in range(len(word) + 1)]
    out = {a + b[1:] for a, b in splits if b}
    out.update(a + b[1] + b[0] + b[2:] for a, b in splits if len(b) > 1)
    out.update(a + c + b[1:] for a, b in splits if b for c in _LETTERS)
    out.update(a + c + b for a, b in splits for c in _LETTERS)
    out.discard(word)
    return out


def candidates(word: str) -> set[str]:
    """The analysed terms one edit away from a typed word (stop words and fillers left out)."""
    out: set[str] = set()
    for variant in edits(word):
        if variant in STOP_WORDS or variant in FILLER_WORDS:
            continue
        out.add(stem(variant))
    out.discard(stem(word))
    return out


def _shared_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def expand(words: Sequence[tuple[str, str]], lookup: Lookup) -> Expansion:
    """Query terms from ``(word, term)`` pairs (:func:`analyzer.query_words`), with
    corrections for the correctable words whose term no record in reach holds.

    ``lookup`` is called at most twice: once for the typed terms, once for every candidate
    correction together.
    """
    typed = [term for _, term in words]
    df = dict(lookup(typed))
    missing = [(w, t) for w, t in words if df.get(t, 0) <= 0 and correctable(w)]
    terms = [Term(t) for t in typed]
    if not missing:
        return Expansion(tuple(terms), df)
    options = {w: candidates(w) - set(typed) for w, _ in missing}
    everything = set().union(*options.values())
    found = dict(lookup(everything)) if everything else {}
    df.update(found)
    for word, term in missing:
        held = sorted((c for c in options[word] if found.get(c, 0) > 0),
                      key=lambda c: (-_shared_prefix(term, c), -found[c], c))
        if held:
            best = _shared_prefix(term, held[0])
            held = [c for c in held if _shared_prefix(term, c) == best]
        terms.extend(Term(c, CORRECTION_WEIGHT, word) for c in held[:MAX_CORRECTIONS])
    return Expansion(tuple(terms), df)


__all__ = ["CORRECTION_WEIGHT", "MAX_CORRECTIONS", "MAX_WORD_CHARS", "MIN_WORD_CHARS",
           "Expansion", "Lookup", "Term", "candidates", "correctable", "edits", "expand"]
