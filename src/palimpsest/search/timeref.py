"""Relative time in a question ("two weeks ago", "last Saturday", "in the past month").

A memory question often names *when* rather than *what*: "What did I cook two weeks ago?".
The words "two weeks ago" match nothing useful, but the records written about that day carry
their time (an episode's ``time.valid_from``). :func:`resolve` turns such a phrase into a
:class:`Window` around the instant it points at, counted back from the moment of the recall;
:func:`closeness` then says how near a record's time lies to that window's centre.

Only phrases that point at a moment are resolved: ``N days|weeks|months|years ago`` (N a
digit or a word from one to twelve, ``a``/``an``, ``a couple of``, ``a few``, ``several``),
``yesterday`` and ``last <weekday>|weekend``. A question asking for the time itself ("how many
days ago did I …") names no moment and resolves to nothing. Spans reaching up to now ("in the
past month", "this week") and loose ones ("last month") are not resolved either: measured on
LongMemEval_S (development half) they moved the wrong records up. English only; nothing here
reads a clock: the caller passes ``now``.

Pure: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

_NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
    "a couple of": 2, "couple of": 2, "a few": 3, "few": 3, "several": 3,
}
_UNIT_DAYS = {"day": 1.0, "week": 7.0, "month": 30.4, "year": 365.0}
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_NUM = r"(\d{1,3}|a couple of|couple of|a few|few|several|an?|one|two|three|four|five|six|" \
       r"seven|eight|nine|ten|eleven|twelve)"
_UNIT = r"(day|week|month|year)s?"

_AGO = re.compile(rf"\b{_NUM}\s+{_UNIT}\s+ago\b", re.IGNORECASE)
_LAST_DAY = re.compile(r"\blast\s+(" + "|".join(_WEEKDAYS) + r"|weekend)\b", re.IGNORECASE)
_YESTERDAY = re.compile(r"\byesterday\b", re.IGNORECASE)

MIN_SLACK_DAYS = 1.5
"""Even "a day ago" tolerates this much on either side: a conversation about an event is
often held a day after it."""
SLACK_SHARE = 0.25
"""A point ``N units ago`` tolerates a quarter of its distance (two months ago: ± 15 days)."""


@dataclass(frozen=True, slots=True)
class Window:
    """The period a phrase points at: ``center`` ± ``slack`` (UTC)."""

    center: datetime
    slack: timedelta
    phrase: str


def _count(word: str | None) -> float:
    if word is None:
        return 1.0
    word = " ".join(word.lower().split())
    return float(word) if word.isdigit() else float(_NUMBERS[word])


def _point(now: datetime, days: float, phrase: str) -> Window:
    slack = max(MIN_SLACK_DAYS, SLACK_SHARE * days)
    return Window(now - timedelta(days=days), timedelta(days=slack), phrase)


def resolve(text: str, now: datetime) -> Window | None:
    """The first period ``text`` names, counted back from ``now``; ``None`` if it names none.

    ``now`` must be timezone-aware.
    """
    if m := _AGO.search(text):
        days = _count(m.group(1)) * _UNIT_DAYS[m.group(2).lower()]
        return _point(now, days, m.group(0))
    if m := _LAST_DAY.search(text):
        name = m.group(1).lower()
        if name == "weekend":
            # The Saturday before the most recent Sunday, with both days in the slack.
            back = (now.weekday() - 5) % 7 or 7
            return Window(now - timedelta(days=back - 0.5), timedelta(days=MIN_SLACK_DAYS),
                          m.group(0))
        back = (now.weekday() - _WEEKDAYS.index(name)) % 7 or 7
        return Window(now - timedelta(days=back), timedelta(days=1.0), m.group(0))
    if m := _YESTERDAY.search(text):
        return Window(now - timedelta(days=1), timedelta(days=1.0), m.group(0))
    return None


def parse_instant(value: str | None) -> datetime | None:
    """An RFC 3339 instant as stored by the service, or ``None`` when absent or unreadable."""
    if not value:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def closeness(window: Window, when: datetime) -> float:
    """1.0 at the window's centre, falling linearly to 0.0 at its edges (and 0.0 beyond)."""
    distance = abs((when - window.center).total_seconds())
    return max(0.0, 1.0 - distance / window.slack.total_seconds())


__all__ = ["MIN_SLACK_DAYS", "SLACK_SHARE", "Window", "closeness", "parse_instant", "resolve"]
