"""The analyzer: tokens, folding, stop words, stemming, CJK, limits."""

from __future__ import annotations

import pytest

from palimpsest.search.analyzer import MAX_TERM_CHARS, analyze, query_terms, query_words, stem


@pytest.mark.parametrize(
    ("words", "root"),
    [
        (["hike", "hikes", "hiking", "hiked"], "hik"),
        (["run", "runs", "running"], "run"),
        (["study", "studies", "studied", "studying"], "studi"),
        (["play", "plays", "played", "playing"], "play"),
        (["shop", "shops", "shopping", "shopped"], "shop"),
        (["class", "classes"], "class"),
        (["box", "boxes"], "box"),
        (["paint", "painting", "paintings", "painted"], "paint"),
        (["call", "calls", "called", "calling"], "call"),
    ],
)
def test_stemmer_conflates_inflections(words: list[str], root: str) -> None:
    assert {stem(w) for w in words} == {root}


@pytest.mark.parametrize(
    "word", ["need", "bring", "sing", "thing", "king", "bus", "analysis", "dress", "tree"]
)
def test_stemmer_leaves_lookalikes(word: str) -> None:
    # No vowel before the suffix, "eed", "ss"/"is"/"us" endings, "ee", short words: unchanged.
    assert stem(word) == word


def test_non_ascii_words_are_not_stemmed() -> None:
    assert stem("données") == "données"
    assert analyze("Straßen") == ["straßen"]


def test_case_and_latin_accents_fold() -> None:
    assert analyze("CAFÉ Café cafe") == ["caf", "caf", "caf"]
    assert query_terms("Ünïcödé") == ["unicod"]


def test_other_scripts_keep_their_marks() -> None:
    # Devanagari vowel signs and virama are combining marks inside the word.
    assert analyze("हिन्दी भाषा") == ["हिन्दी", "भाषा"]
    assert analyze("Ελληνικά") == ["ελληνικά"]


def test_stop_words_dropped_unless_alone() -> None:
    assert analyze("What is the plan for the trip?") == ["plan", "trip"]
    assert analyze("to be or not to be") == ["to", "be", "or", "not", "to", "be"]
    assert query_terms("to be or not to be") == ["to", "be", "or", "not"]


def test_apostrophes_and_possessives() -> None:
    assert analyze("Caroline's friends don't know") == ["carolin", "friend", "know"]


def test_cjk_runs_split_into_characters() -> None:
    assert analyze("我爱東京") == ["我", "爱", "東", "京"]
    assert query_terms("我爱東京 tower") == ["我 爱 東 京", "tower"]


def test_numbers_are_terms() -> None:
    assert analyze("Flight 1234 on 8 May 2023") == ["flight", "1234", "8", "may", "2023"]


def test_long_terms_cut() -> None:
    assert analyze("a" * 1000) == ["a" * MAX_TERM_CHARS]


def test_query_terms_distinct_ordered_and_bounded() -> None:
    assert query_terms("Dogs dog DOGS cats") == ["dog", "cat"]
    assert len(query_terms(" ".join(f"w{i}" for i in range(500)), limit=10)) == 10


def test_separators() -> None:
    assert analyze("e-mail\x00x\u200by\u202ez") == ["e", "mail", "x", "y", "z"]
    assert analyze("") == []
    assert query_terms("   ") == []


def test_ascii_fast_path_matches_general_path() -> None:
    # The same words with one non-ASCII character appended take the general path.
    text = "Hello, World! it's 2023-05-08; foo_bar x" + "y" * 100
    assert analyze(text) == analyze(text + " é")[:-1]


@pytest.mark.parametrize(
    ("question", "terms"),
    [
        pytest.param("Hey, quick question: what did Caroline paint?", ["carolin", "paint"],
                     id="greeting-and-preamble"),
        pytest.param("Hi! Can you remind me where Melanie camped?", ["melanie", "camp"],
                     id="remind-me"),
        pytest.param("Sorry to bother you, but when is the Acme renewal?", ["acm", "renewal"],
                     id="apology"),
        pytest.param("Okay so I was wondering, which pets does Jon have?", ["pet", "jon"],
                     id="wondering"),
        pytest.param("um, do you remember the dentist thanks", ["dentist"], id="hesitation"),
        pytest.param("What questions did the quick reviewer ask?",
                     ["question", "quick", "reviewer", "ask"], id="content-words-stay"),
    ],
)
def test_query_terms_leave_out_conversational_padding(question: str, terms: list[str]) -> None:
    assert query_terms(question) == terms


def test_padding_alone_is_still_a_query_and_documents_keep_it() -> None:
    assert query_terms("Hello!") == ["hello"]
    assert query_terms("thank you!") == ["thank"]
    assert query_terms("thank you so much") == ["much"]
    assert query_terms("hey, thanks") == ["hey", "thank"]
    assert analyze("Hey, quick question: thanks") == ["hey", "quick", "question", "thank"]


def test_query_words_keep_the_typed_word_beside_its_term() -> None:
    assert query_words("Hey, Caroline's paintings?") == [("caroline", "carolin"),
                                                       ("paintings", "paint")]
