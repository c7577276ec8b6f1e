"""Relative periods in questions, and the re-ranker's use of them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from palimpsest.search import rank, timeref

NOW = datetime(2023, 5, 30, 18, 0, tzinfo=UTC)  # a Tuesday


@pytest.mark.parametrize(
    ("question", "days_back", "slack_days"),
    [
        pytest.param("What did I cook two weeks ago?", 14, 3.5, id="word-number"),
        pytest.param("what did I buy 5 days ago", 5, 1.5, id="digits-min-slack"),
        pytest.param("Which charity event did I join a month ago?", 30.4, 7.6, id="a-month"),
        pytest.param("the trip a couple of years ago", 730, 182.5, id="couple-of"),
        pytest.param("Who did I see YESTERDAY?", 1, 1, id="yesterday"),
        pytest.param("the concert last Saturday", 3, 1, id="last-weekday"),
        pytest.param("what I did last Tuesday", 7, 1, id="last-same-weekday-is-a-week-back"),
    ],
)
def test_resolve_points_back_from_now(question: str, days_back: float, slack_days: float) -> None:
    window = timeref.resolve(question, NOW)
    assert window is not None
    assert window.center == NOW - timedelta(days=days_back)
    assert window.slack == timedelta(days=slack_days)


@pytest.mark.parametrize(
    "question",
    [
        pytest.param("How many days ago did I buy a smoker?", id="asks-for-the-time"),
        pytest.param("How many weeks ago did I meet my aunt?", id="asks-for-the-time-weeks"),
        pytest.param("What did I eat in the past month?", id="span-up-to-now"),
        pytest.param("Which shoes did I clean last month?", id="last-month-is-too-vague"),
        pytest.param("Where did we adopt the puppy?", id="no-period"),
        pytest.param("the agora festival", id="ago-inside-a-word"),
    ],
)
def test_resolve_ignores_questions_naming_no_period(question: str) -> None:
    assert timeref.resolve(question, NOW) is None


def test_closeness_peaks_at_the_centre_and_ends_at_the_slack() -> None:
    window = timeref.resolve("two weeks ago", NOW)
    assert window is not None
    assert timeref.closeness(window, window.center) == 1.0
    assert timeref.closeness(window, window.center + timedelta(days=1.75)) == pytest.approx(0.5)
    assert timeref.closeness(window, window.center - timedelta(days=3.5)) == 0.0
    assert timeref.closeness(window, NOW) == 0.0


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2023-05-16T10:00:00Z", datetime(2023, 5, 16, 10, tzinfo=UTC)),
        ("2023-05-16T10:00:00.000000Z", datetime(2023, 5, 16, 10, tzinfo=UTC)),
        ("2023-05-16T10:00:00", datetime(2023, 5, 16, 10, tzinfo=UTC)),
        ("not a time", None),
        ("", None),
        (None, None),
    ],
)
def test_parse_instant(value: str | None, expected: datetime | None) -> None:
    assert timeref.parse_instant(value) == expected


def _cands() -> list[rank.Candidate]:
    # Same words, same BM25: only their time tells them apart.
    def c(key: str, when: str | None) -> rank.Candidate:
        return rank.Candidate(key, "went hiking", 1.0, when=when, analyzed="went hik")

    return [
        c("a", "2023-05-29T09:00:00Z"),  # yesterday
        c("b", "2023-05-16T09:00:00Z"),  # two weeks ago
        c("c", None),  # no time
        c("d", "2023-04-01T09:00:00Z"),
    ]


def test_rerank_favours_records_from_the_named_period() -> None:
    ranked = rank.rerank("Where did I go hiking two weeks ago?", _cands(), limit=4, now=NOW)
    assert ranked[0].key == "b"
    assert sorted(r.key for r in ranked) == ["a", "b", "c", "d"]


def test_rerank_without_now_or_period_ignores_time() -> None:
    plain = [r.key for r in rank.rerank("Where did I go hiking?", _cands(), limit=4, now=NOW)]
    assert plain == ["a", "b", "c", "d"]  # ties fall back to the key
    no_now = rank.rerank("Where did I go hiking two weeks ago?", _cands(), limit=4)
    assert [r.key for r in no_now] == plain
