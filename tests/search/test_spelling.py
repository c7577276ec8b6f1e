"""Misspelled query words are matched to the nearest terms the memories searched hold."""

from __future__ import annotations

from collections.abc import Collection, Mapping

import pytest

from palimpsest.search import spelling
from palimpsest.search.analyzer import analyze, query_words


class Vocabulary:
    """A lookup over a fixed set of documents, counting how it is asked."""

    def __init__(self, *docs: str) -> None:
        self.df: dict[str, int] = {}
        for doc in docs:
            for term in set(analyze(doc)):
                self.df[term] = self.df.get(term, 0) + 1
        self.calls: list[set[str]] = []

    def __call__(self, terms: Collection[str]) -> Mapping[str, int]:
        self.calls.append(set(terms))
        return {t: self.df[t] for t in terms if t in self.df}


def _expand(question: str, vocabulary: Vocabulary) -> spelling.Expansion:
    return spelling.expand(query_words(question), vocabulary)


def test_edits_are_every_string_one_edit_away() -> None:
    got = spelling.edits("cat")
    assert {"at", "ct", "ca"} <= got  # drops
    assert {"act", "cta"} <= got  # neighbours swapped
    assert {"bat", "cut", "car"} <= got  # replaced
    assert {"cart", "scat", "cats"} <= got  # inserted
    assert "cat" not in got and "dog" not in got
    # 3 drops + 2 swaps + 3·26 replacements + 4·26 insertions, less the repeats
    assert len(got) == len(set(got)) and 150 < len(got) < 3 + 2 + 78 + 104


@pytest.mark.parametrize(
    ("typed", "meant"),
    [
        pytest.param("restuarant", "restaurant", id="swap"),
        pytest.param("paintng", "paint", id="drop-then-stem"),
        pytest.param("Carolline", "carolin", id="double-letter"),
        pytest.param("campimg", "camp", id="keyboard-neighbour"),
    ],
)
def test_a_word_no_record_holds_is_corrected(typed: str, meant: str) -> None:
    vocabulary = Vocabulary("Caroline booked the restaurant", "Caroline went camping",
                            "Melanie is painting")
    out = _expand(f"Where did {typed} go?", vocabulary)
    assert out.terms[0] == spelling.Term(analyze(typed)[0])  # the typed term stays
    corrections = [t for t in out.terms if t.corrects is not None]
    assert [(t.term, t.weight, t.corrects) for t in corrections] == [
        (meant, spelling.CORRECTION_WEIGHT, typed.lower())]
    assert out.df[meant] >= 1
    assert out.weights()[meant] == spelling.CORRECTION_WEIGHT < 1.0
    assert len(vocabulary.calls) == 2  # typed terms, then every candidate at once


def test_words_the_reach_holds_are_never_corrected() -> None:
    vocabulary = Vocabulary("the cat sat", "a cart rolled")
    out = _expand("cart", vocabulary)
    assert out.names() == ["cart"]
    assert len(vocabulary.calls) == 1


def test_short_words_numbers_and_other_scripts_are_left_as_typed() -> None:
    vocabulary = Vocabulary("the cat sat in 2023", "straße")
    for question in ("cta", "2024", "strasse", "straßen"):
        out = _expand(question, vocabulary)
        assert all(t.corrects is None for t in out.terms), question
    assert not spelling.correctable("x" * (spelling.MAX_WORD_CHARS + 1))


def test_only_the_nearest_corrections_count_and_at_most_a_few() -> None:
    # "movie" is stored only as "movies" (term "movi") and "move" (term "mov"): the longer
    # shared start wins, however common the other is.
    vocabulary = Vocabulary("new movies out", "we move house", "move it", "moving day")
    out = _expand("a movie tonight", vocabulary)
    assert [t.term for t in out.terms if t.corrects == "movie"] == ["movi"]
    crowded = Vocabulary(*(f"{w} here" for w in ("bake", "bike", "bale", "bane", "cake", "lake")))
    many = _expand("bxke", crowded)
    assert 0 < len([t for t in many.terms if t.corrects]) <= spelling.MAX_CORRECTIONS


def test_corrections_never_bring_stop_words_or_fillers() -> None:
    vocabulary = Vocabulary("what then", "hello there")
    out = _expand("whta hellp", vocabulary)
    assert [t for t in out.terms if t.corrects] == []
    assert "what" not in spelling.candidates("whta")
