"""Text analysis for indexing and for queries: text in, index terms out.

The same function analyses stored text and query text, so whatever it does (case folding,
accent folding on Latin letters, stop words, stemming) can never make a document unreachable
by the words it contains.

- A token is a run of Unicode letters, numbers and combining marks (so Devanagari or Thai
  words keep their vowel signs); everything else separates tokens.
- Case is folded per code point the way Go's ``unicode.ToLower`` does (``palimpsest.text``).
- Accents on Latin letters are dropped (``café`` matches ``cafe``); other scripts keep theirs.
- Han, Hiragana, Katakana and Hangul runs have no spaces between words, so each character of
  such a run becomes its own term; a query run becomes the phrase of its characters.
- English stop words are dropped, unless a text has nothing else.
- A light English suffix stemmer (written here, no external code) conflates plurals and
  ``-ing``/``-ed`` forms; it only touches ASCII letter words.
- A question's conversational padding — greetings, thanks, hesitations and the phrases people
  put before what they ask ("quick question", "can you remind me", "I was wondering") — is
  left out of its query terms (:data:`FILLER_WORDS`, :data:`FILLER_PHRASES`), unless it is all
  there is. Stored text keeps every word, so nothing becomes unfindable.

Limits keep hostile input cheap: a term is cut at :data:`MAX_TERM_CHARS` characters.

This module does not know about SQL or FTS5 syntax; see :mod:`palimpsest.search.fts`.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator

from palimpsest.text import to_lower

MAX_TERM_CHARS = 64
"""A longer token is cut to this many characters, in documents and queries alike."""

STOP_WORDS = frozenset(
    (
        "a", "about", "above", "after", "again", "against", "all", "am", "an", "and", "any",
        "are", "as", "at", "be", "because", "been", "before", "being", "below", "between",
        "both", "but", "by", "can", "could", "did", "do", "does", "doing", "down", "during",
        "each", "few", "for", "from", "further", "had", "has", "have", "having", "he", "her",
        "here", "hers", "herself", "him", "himself", "his", "how", "i", "if", "in", "into", "is",
        "it", "its", "itself", "just", "me", "more", "most", "my", "myself", "no", "nor", "not",
        "now", "of", "off", "on", "once", "only", "or", "other", "our", "ours", "ourselves",
        "out", "over", "own", "same", "she", "should", "so", "some", "such", "than", "that",
        "the", "their", "theirs", "them", "themselves", "then", "there", "these", "they", "this",
        "those", "through", "to", "too", "under", "until", "up", "very", "was", "we", "were",
        "what", "when", "where", "which", "while", "who", "whom", "why", "will", "with", "would",
        "you", "your", "yours", "yourself", "yourselves", "s", "t", "d", "ll", "m", "re", "ve",
        "don", "doesn", "didn", "isn", "aren", "wasn", "weren", "won", "wouldn", "shouldn",
        "couldn", "hasn", "haven", "hadn", "also", "yet", "ever", "us", "let", "shall", "might",
        "must",
    )
)
"""English function words that carry no topic; dropped from documents and queries."""

FILLER_WORDS = frozenset(
    (
        "hi", "hey", "heya", "hiya", "hello", "howdy", "greetings", "yo", "thanks", "thank",
        "thx", "ty", "cheers", "please", "pls", "plz", "sorry", "um", "umm", "uh", "uhh", "uhm",
        "hm", "hmm", "hmmm", "er", "erm", "ah", "oh", "okay", "ok", "kk", "alright", "btw",
        "lol", "anyway", "anyways", "hopefully", "actually", "basically", "honestly",
        "really", "maybe",
    )
)
"""Words that pad a question without naming its topic; left out of query terms (never out of
stored text)."""

FILLER_PHRASES: tuple[tuple[str, ...], ...] = (
    ("good", "morning"), ("good", "afternoon"), ("good", "evening"),
    ("quick", "question"), ("a", "question"), ("one", "question"), ("another", "question"),
    ("question", "for", "you"),
    ("one", "more", "thing"), ("one", "last", "thing"), ("just", "checking"),
    ("i", "was", "wondering"), ("i", "am", "wondering"), ("i", "m", "wondering"),
    ("just", "wondering"), ("i", "wonder"), ("wondering", "if"),
    ("can", "you", "tell", "me"), ("could", "you", "tell", "me"), ("tell", "me"),
    ("can", "you", "remind", "me"), ("could", "you", "remind", "me"), ("remind", "me"),
    ("do", "you", "remember"), ("do", "you", "know"), ("do", "you", "recall"),
    ("you", "know"), ("i", "mean"), ("let", "me", "think"), ("let", "me", "see"),
    ("to", "bother", "you"), ("by", "the", "way"), ("out", "of", "curiosity"),
    ("i", "need", "to", "know"), ("i", "want", "to", "know"), ("i", "d", "like", "to", "know"),
    ("help", "me", "remember"),
)
"""Word sequences (of folded tokens, stop words included) that pad a question; each is left
out of the query terms wherever it occurs."""

_PHRASE_STARTS: dict[str, tuple[tuple[str, ...], ...]] = {}
for _phrase in sorted(FILLER_PHRASES, key=len, reverse=True):
    _PHRASE_STARTS[_phrase[0]] = (*_PHRASE_STARTS.get(_phrase[0], ()), _phrase)

_CJK_RANGES = (
    (0x1100, 0x11FF),  # Hangul Jamo
    (0x3040, 0x30FF),  # Hiragana, Katakana
    (0x3400, 0x4DBF),  # Han extension A
    (0x4E00, 0x9FFF),  # Han
    (0xAC00, 0xD7AF),  # Hangul syllables
    (0xF900, 0xFAFF),  # Han compatibility
    (0x20000, 0x2FFFF),  # Han extensions B..
)
_VOWELS = frozenset("aeiouy")
_ASCII_WORD = re.compile(r"[A-Za-z0-9]+")


def _is_cjk(char: str) -> bool:
    code = ord(char)
    return any(low <= code <= high for low, high in _CJK_RANGES)


def _char_class(char: str) -> str:
    """'w' word, 'm' combining mark, 'c' CJK, '' separator."""
    if char.isascii():
        return "w" if char.isalnum() else ""
    category = unicodedata.category(char)
    if category[0] == "M":
        return "m"
    if category[0] in "LN":
        return "c" if _is_cjk(char) else "w"
    return ""


def _fold(token: str) -> str:
    """Lower-case and drop accents that sit on ASCII letters (é → e, but not Devanagari signs)."""
    lowered = to_lower(token)
    if lowered.isascii():
        return lowered
    out: list[str] = []
    for char in unicodedata.normalize("NFKD", lowered):
        if unicodedata.category(char) == "Mn" and out and out[-1].isascii():
            continue
        out.append(char)
    return unicodedata.normalize("NFC", "".join(out))


def raw_tokens(text: str) -> Iterator[tuple[str, bool]]:
    """Yield ``(token, is_cjk_run)`` in text order, folded and cut to :data:`MAX_TERM_CHARS`.

    Latin and other spaced scripts give one token per word; a CJK run is yielded whole with
    ``is_cjk_run`` set, and callers split it into characters.
    """
    if text.isascii():
        # Fast path (most stored text): same result as the loop below, at C speed.
        for match in _ASCII_WORD.finditer(text):
            yield match.group().lower()[:MAX_TERM_CHARS], False
        return
    current: list[str] = []
    kind = ""
    for char in text:
        cls = _char_class(char)
        if cls == "m":
            if current:
                current.append(char)
            continue
        if cls and (not current or cls == kind):
            current.append(char)
            kind = cls
            continue
        if current:
            yield _emit(current, kind)
            current = []
        if cls:
            current.append(char)
            kind = cls
    if current:
        yield _emit(current, kind)


def _emit(chars: list[str], kind: str) -> tuple[str, bool]:
    if kind == "c":
        return "".join(chars), True
    return _fold("".join(chars))[:MAX_TERM_CHARS], False


def stem(word: str) -> str:
    """Light English suffix stripping: plurals, ``-ing``, ``-ed``, final ``e`` and ``y``.

    Only lower-case ASCII letter words of four or more letters change. The rules aim at
    conflation (``hike``, ``hikes``, ``hiking``, ``hiked`` → ``hik``), not at dictionary
    roots; the output is an index key, never shown to anyone.
    """
    if len(word) < 4 or not (word.isascii() and word.isalpha()):
        return word
    w = word
    if w.endswith("sses"):
        w = w[:-2]
    elif w.endswith("ies") and len(w) > 4:
        w = w[:-3] + "i"
    elif w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    for suffix in ("ing", "ed"):
        if w.endswith(suffix) and not w.endswith("eed"):
            base = w[: -len(suffix)]
            if len(base) >= 2 and _VOWELS.intersection(base) and (
                suffix == "ed" or len(base) >= 3
            ):
                w = base
                if len(w) >= 4 and w[-1] == w[-2] and w[-1] not in "aeioulsz":
                    w = w[:-1]
            break
    if len(w) >= 3 and w.endswith("e") and w[-2] not in _VOWELS:
        w = w[:-1]
    if len(w) >= 3 and w.endswith("y") and w[-2] not in _VOWELS:
        w = w[:-1] + "i"
    return w


def analyze(text: str) -> list[str]:
    """Index terms of ``text`` in order, repeats kept: what is stored for a document.

    Stop words are dropped unless nothing else is left (so "to be or not to be" is still
    findable by itself). CJK runs give one term per character.
    """
    kept: list[str] = []
    stops: list[str] = []
    for token, cjk in raw_tokens(text):
        if cjk:
            kept.extend(token)
            continue
        if token in STOP_WORDS:
            stops.append(token)
            continue
        kept.append(stem(token))
    return kept if kept or not stops else stops


def query_words(text: str, *, limit: int = 64) -> list[tuple[str, str]]:
    """Distinct query terms of ``text`` with the word each came from: ``(word, term)`` pairs
    in first-seen order, at most ``limit`` of them.

    ``term`` matches exactly the terms :func:`analyze` stores; ``word`` is the folded token
    before stemming (what a spelling correction starts from). A CJK run becomes one term
    whose characters are separated by spaces: a phrase once quoted for FTS5. Fillers
    (:data:`FILLER_WORDS`, :data:`FILLER_PHRASES`) and stop words are left out; when nothing
    else is left the fillers count, and when there are none either the stop words do.
    """
    tokens = list(raw_tokens(text))
    words = [token for token, _ in tokens]
    seen: set[str] = set()
    kept: list[tuple[str, str]] = []
    padding: list[tuple[str, str]] = []
    stops: list[tuple[str, str]] = []
    skip = 0
    for index, (token, cjk) in enumerate(tokens):
        if skip:
            skip -= 1
            if token not in STOP_WORDS:
                padding.append((token, stem(token)))
            continue
        if cjk:
            pair = (token, " ".join(token[:MAX_TERM_CHARS]))
        elif (phrase := _filler_at(words, index)) is not None:
            skip = len(phrase) - 1
            if token not in STOP_WORDS:
                padding.append((token, stem(token)))
            continue
        elif token in STOP_WORDS:
            stops.append((token, token))
            continue
        elif token in FILLER_WORDS:
            padding.append((token, stem(token)))
            continue
        else:
            pair = (token, stem(token))
        if pair[1] not in seen:
            seen.add(pair[1])
            kept.append(pair)
            if len(kept) >= limit:
                break
    if not kept:
        kept = list({term: (word, term) for word, term in padding or stops}.values())[:limit]
    return kept


def _filler_at(words: list[str], index: int) -> tuple[str, ...] | None:
    for phrase in _PHRASE_STARTS.get(words[index], ()):
        if tuple(words[index:index + len(phrase)]) == phrase:
            return phrase
    return None


def query_terms(text: str, *, limit: int = 64) -> list[str]:
    """Distinct query terms of ``text`` in first-seen order, at most ``limit`` of them (the
    terms of :func:`query_words`)."""
    return [term for _, term in query_words(text, limit=limit)]


__all__ = ["FILLER_PHRASES", "FILLER_WORDS", "MAX_TERM_CHARS", "STOP_WORDS", "analyze",
           "query_terms", "query_words", "raw_tokens", "stem"]
