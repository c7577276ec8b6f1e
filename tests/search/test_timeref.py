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


def _utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)  # type: ignore[misc]


@pytest.mark.parametrize(
    ("question", "start", "end"),
    [
        pytest.param("What painting did Melanie show on October 13, 2023?", (2023, 10, 13),
                     (2023, 10, 13), id="month-day-year"),
        pytest.param("What did Gina find on 1 February, 2023?", (2023, 2, 1), (2023, 2, 1),
                     id="day-month-year"),
        pytest.param("the book he finished on the 8th of December, 2023", (2023, 12, 8),
                     (2023, 12, 8), id="ordinal-of"),
        pytest.param("our trip 2023-05-08", (2023, 5, 8), (2023, 5, 8), id="iso"),
        pytest.param("Where did Joanna travel to in July 2022?", (2022, 7, 1), (2022, 7, 31),
                     id="month-year"),
        pytest.param("what did we plan in May, 2023", (2023, 5, 1), (2023, 5, 31),
                     id="ambiguous-month-with-year"),
        pytest.param("What did John visit in 2022?", (2022, 1, 1), (2022, 12, 31), id="year"),
        pytest.param("during summer 2022", (2022, 6, 1), (2022, 8, 31), id="season"),
        pytest.param("the week before August 3, 2023", (2023, 8, 3), (2023, 8, 3),
                     id="anchored-day"),
        pytest.param("between August 5 and August 9, 2023", (2023, 8, 5), (2023, 8, 9),
                     id="range-of-days"),
        pytest.param("from November to March 2023", (2022, 11, 1), (2023, 3, 31),
                     id="range-over-new-year"),
        pytest.param("in february 2024", (2024, 2, 1), (2024, 2, 29), id="leap-february"),
    ],
)
def test_dates_with_a_year_are_windows(question: str, start: tuple[int, int, int],
                                       end: tuple[int, int, int]) -> None:
    (period,) = timeref.dates(question)
    assert isinstance(period, timeref.Window)
    assert (period.start, period.end) == (_utc(*start), _utc(*end, 23, 59, 59))


@pytest.mark.parametrize(
    ("question", "start", "end"),
    [
        pytest.param("Which outdoor spot did Joanna visit in May?", (5, 1), (5, 31),
                     id="ambiguous-month-after-in"),
        pytest.param("what did I read in January", (1, 1), (1, 31), id="month"),
        pytest.param("my birthday on the 5th of May", (5, 5), (5, 5), id="day-of-month"),
        pytest.param("since March 3rd", (3, 3), (3, 3), id="month-ordinal"),
        pytest.param("rides from July to October", (7, 1), (10, 31), id="month-range"),
    ],
)
def test_dates_without_a_year_recur_every_year(question: str, start: tuple[int, int],
                                               end: tuple[int, int]) -> None:
    (period,) = timeref.dates(question)
    assert period == timeref.Yearly(start, end, period.slack, period.phrase)


@pytest.mark.parametrize(
    "question",
    [
        pytest.param("May I ask what we decided?", id="may-the-verb"),
        pytest.param("they will march on the capital", id="march-the-verb"),
        pytest.param("an august institution", id="august-the-adjective"),
        pytest.param("the 31st of April", id="no-such-day"),
        pytest.param("Jan is my friend", id="a-name"),
        pytest.param("call me at 10:30", id="a-time"),
        pytest.param("two weeks ago", id="relative-is-not-a-date"),
    ],
)
def test_words_that_are_no_dates(question: str) -> None:
    assert timeref.dates(question) == []


def test_a_date_without_a_year_is_judged_in_each_records_own_year() -> None:
    (may,) = timeref.dates("in May")
    assert timeref.closeness(may, _utc(2021, 5, 20)) == 1.0
    assert timeref.closeness(may, _utc(2024, 5, 1)) == 1.0
    # three days past the end of May, with a week of slack
    assert timeref.closeness(may, _utc(2024, 6, 4)) == pytest.approx(1 - 3 / 7, abs=0.01)
    assert timeref.closeness(may, _utc(2024, 8, 1)) == 0.0
    (winter,) = timeref.dates("from December to February")
    assert timeref.closeness(winter, _utc(2023, 1, 15)) == 1.0
    assert timeref.closeness(winter, _utc(2023, 12, 24)) == 1.0
    assert timeref.closeness(winter, _utc(2023, 7, 1)) == 0.0


def test_several_dates_are_several_periods() -> None:
    got = timeref.dates("the novels I finished in January and March")
    assert [p.phrase for p in got] == ["January", "March"]


def test_rerank_favours_records_from_the_named_date_over_the_clock() -> None:
    # The named date decides, not "now" (a relative phrase would be counted from now).
    ranked = rank.rerank("Where did I go hiking on May 16, 2023?", _cands(), limit=4,
                         now=NOW + timedelta(days=400))
    assert ranked[0].key == "b"
    month = rank.rerank("Where did I go hiking in April 2023?", _cands(), limit=4)
    assert month[0].key == "d"  # no clock needed for a date
