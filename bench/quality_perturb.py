"""Everyday changes to how a question is asked, for the perturbation table of bench/quality.py.

Each perturbation is a pure, deterministic function of the question text and its id (the id
seeds the choices, so every engine sees the same perturbed question and a rerun is identical):

- ``lower``: the whole question lower-cased;
- ``no_punct``: every punctuation character removed (``Caroline's`` → ``Carolines``);
- ``filler``: a conversational preamble in front ("Hey, quick question: …");
- ``typo``: one typing slip in one word of four or more letters (two neighbouring letters
  swapped, a letter dropped, a letter doubled, or a letter replaced by a keyboard neighbour);
- ``all``: typo, then filler, then lower-case, then no punctuation.

Nothing here knows the engine's analyser: the word a typo hits is any word of four or more
letters outside a short list of question words, chosen by the id, so a slip can land on a
name, a content word or a stem-sensitive ending alike.
"""

from __future__ import annotations

import hashlib
import random
import re
import unicodedata
from collections.abc import Callable

FILLERS = (
    "Hey, quick question: ",
    "Hi! Can you remind me: ",
    "Sorry to bother you, but ",
    "Okay so I was wondering, ",
    "Hello again. One more thing: ",
    "Hmm, let me think. ",
)
"""Preambles people put before a question (chosen per question by its id)."""

_QUESTION_WORDS = frozenset(
    ("what", "when", "where", "which", "whom", "whose", "does", "did", "have", "would",
     "could", "should", "there", "their", "about", "with", "that", "this", "from", "they",
     "were", "been", "your"))
_WORD = re.compile(r"[A-Za-z]{4,}")
_KEYBOARD = (
    "qwertyuiop",
    "asdfghjkl",
    "zxcvbnm",
)


def _rng(qid: str, kind: str) -> random.Random:
    seed = int.from_bytes(hashlib.sha256(f"{kind}\x00{qid}".encode()).digest()[:8], "big")
    return random.Random(seed)


def _neighbour(char: str, rng: random.Random) -> str:
    low = char.lower()
    for row in _KEYBOARD:
        at = row.find(low)
        if at >= 0:
            options = [row[i] for i in (at - 1, at + 1) if 0 <= i < len(row)]
            picked = rng.choice(options)
            return picked.upper() if char.isupper() else picked
    return char


def lower(text: str, qid: str) -> str:
    """The question lower-cased."""
    return text.lower()


def no_punct(text: str, qid: str) -> str:
    """The question without punctuation characters (Unicode category P*), spaces collapsed."""
    kept = "".join(c for c in text if not unicodedata.category(c).startswith("P"))
    return " ".join(kept.split())


def filler(text: str, qid: str) -> str:
    """A conversational preamble in front of the question (which then goes on in lower case
    after a comma or a conjunction, as it would be typed)."""
    preamble = _rng(qid, "filler").choice(FILLERS)
    if text and not preamble.endswith((": ", ". ")):
        text = text[0].lower() + text[1:]
    return preamble + text


def typo(text: str, qid: str) -> str:
    """One typing slip in one word of four or more letters (unchanged when there is none)."""
    rng = _rng(qid, "typo")
    words = [m for m in _WORD.finditer(text) if m.group().lower() not in _QUESTION_WORDS]
    if not words:
        return text
    m = rng.choice(words)
    word = m.group()
    kind = rng.randrange(4)
    i = rng.randrange(len(word) - 1) if kind == 0 else rng.randrange(len(word))
    if kind == 0 and word[i] != word[i + 1]:  # swap two neighbouring letters
        slip = word[:i] + word[i + 1] + word[i] + word[i + 2:]
    elif kind <= 1:  # drop a letter (also when the two letters to swap are the same)
        slip = word[:i] + word[i + 1:]
    elif kind == 2:  # double a letter
        slip = word[:i] + word[i] + word[i:]
    else:  # a neighbouring key
        slip = word[:i] + _neighbour(word[i], rng) + word[i + 1:]
    return text[: m.start()] + slip + text[m.end():]


def everything(text: str, qid: str) -> str:
    """Typo, filler, lower-case and no punctuation together."""
    return no_punct(lower(filler(typo(text, qid), qid), qid), qid)


PERTURBATIONS: dict[str, Callable[[str, str], str]] = {
    "lower": lower,
    "no_punct": no_punct,
    "filler": filler,
    "typo": typo,
    "all": everything,
}
"""Name → perturbation, in the order of the table."""
