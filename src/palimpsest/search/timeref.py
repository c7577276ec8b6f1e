"""Time in a question: relative periods ("two weeks ago") and dates ("June 2023", "the 5th of May").

A memory question often names *when* rather than *what*: "What did I cook two weeks ago?",
"What did Gina find for her store on 1 February, 2023?". Those words match nothing useful,
but the records written then carry their time (an episode's ``time.valid_from``).
:func:`dates` and :func:`resolve` turn such phrases into :class:`Window` and :class:`Yearly`
periods; :func:`closeness` says how near a record's time lies to one.

Dates (:func:`dates`; the re-ranker uses a question's relative phrase only when it names no
date):

- a day: ``October 13, 2023``, ``13 October 2023``, ``the 8th of December, 2023``,
  ``2023-10-13``, ``May 5th`` and ``the 5th of May`` (no year);
- a month: ``June 2023``, ``in January``, ``during March``; ``May``, ``March`` and ``August``
  count as months only beside a day, a year or a word such as ``in``, ``of`` or ``since``;
- a season with its year (``summer 2022``) and a year (``in 2022``, ``2022``);
- a range ``from July to October``, ``between May 1 and May 9, 2023`` is one period.

A date without a year is resolved against each record's own time: "January" is January of
the year the record was written in (:class:`Yearly`). Month and weekday names are English.

Relative periods (:func:`resolve`), counted back from the moment of the recall (``now``):
``N days|weeks|months|years ago`` (N a digit or a word from one to twelve, ``a``/``an``, ``a
couple of``, ``a few``, ``several``), ``yesterday`` and ``last <weekday>|weekend``. A question
asking for the time itself ("how many days ago did I …") names no moment and resolves to
nothing. Spans
reaching up to now ("in the past month", "this week") and loose ones ("last month") are not
resolved: measured on LongMemEval_S (development half) they moved the wrong records up.

Pure: no I/O; nothing here reads a clock (the caller passes ``now``).
"""

from __future__ import annotations

import calendar
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

_MONTHS = {name: i for i, name in enumerate(
    ("january", "february", "march", "april", "may", "june", "july", "august", "september",
     "october", "november", "december"), start=1)}
_MONTHS.update({name[:3]: i for name, i in list(_MONTHS.items())} | {"sept": 9})
_AMBIGUOUS = frozenset(("may", "march", "august", "mar", "jan", "jun", "dec", "oct", "sep",
                        "aug", "apr", "nov", "feb", "jul", "sept"))
"""Month names that are also words (or abbreviations): months only beside a day, a year or
a preposition."""
_SEASONS = {"spring": (3, 5), "summer": (6, 8), "autumn": (9, 11), "fall": (9, 11),
            "winter": (12, 2)}
_MONTH = r"(?P<{0}>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<{0}>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<{0}>(?:19|20)\d\d)"
_BEFORE_MONTH = r"(?:in|of|during|since|until|till|by|from|to|through|early|late|mid|around|" \
                r"before|after|last|this|next|between|and)"
_DATE = re.compile(
    "|".join((
        r"\b" + _YEAR.format("iy") + r"-(?P<im>[01]\d)-(?P<id>[0-3]\d)\b",
        r"\b(?:the\s+)?" + _DAY.format("ad") + r"\s+(?:of\s+)?" + _MONTH.format("am")
        + r"(?:,?\s+" + _YEAR.format("ay") + r")?\b",
        r"\b" + _MONTH.format("bm") + r"\s+" + _DAY.format("bd") + r"(?!\d|:)(?:,?\s+"
        + _YEAR.format("by") + r")?\b",
        r"\b(?P<cs>" + "|".join(_SEASONS) + r")\s+(?:of\s+)?" + _YEAR.format("cy") + r"\b",
        r"(?:\b(?P<ep>" + _BEFORE_MONTH + r")\s+(?:the\s+month\s+of\s+)?)?\b"
        + _MONTH.format("em") + r"(?!\s+[0-3]?\d(?:st|nd|rd|th)?\b)(?:,?\s+(?:of\s+)?"
        + _YEAR.format("ey") + r")?\b",
        r"\b" + _YEAR.format("fy") + r"\b",
    )),
    re.IGNORECASE,
)
_RANGE_JOIN = re.compile(r"\s*(?:to|until|till|through|and|-|–)\s*", re.IGNORECASE)
_RANGE_OPEN = re.compile(r"\b(?:from|between)\s*$", re.IGNORECASE)

MIN_SLACK_DAYS = 1.5
"""Even "a day ago" tolerates this much on either side: a conversation about an event is
often held a day after it."""
SLACK_SHARE = 0.25
"""A point ``N units ago`` tolerates a quarter of its distance (two months ago: ± 15 days)."""
DAY_SLACK_DAYS = 3.0
"""A named day tolerates this much on either side (a conversation about it is held near it)."""
MONTH_SLACK_DAYS = 7.0
"""A named month, season or range tolerates this much beyond its ends."""
YEAR_SLACK_DAYS = 15.0
"""A named year tolerates this much beyond its ends."""


@dataclass(frozen=True, slots=True)
class Window:
    """A period on the calendar: ``start`` to ``end`` (UTC), tolerating ``slack`` beyond each
    end. A relative phrase is a point (``start == end``)."""

    start: datetime
    end: datetime
    slack: timedelta
    phrase: str

    @property
    def center(self) -> datetime:
        """The middle of the period."""
        return self.start + (self.end - self.start) / 2


@dataclass(frozen=True, slots=True)
class Yearly:
    """A date named without a year: from ``(month, day)`` to ``(month, day)`` in whichever year
    a record was written (``end`` before ``start`` wraps over the new year)."""

    start: tuple[int, int]
    end: tuple[int, int]
    slack: timedelta
    phrase: str


Period = Window | Yearly


def _count(word: str | None) -> float:
    if word is None:
        return 1.0
    word = " ".join(word.lower().split())
    return float(word) if word.isdigit() else float(_NUMBERS[word])


def _point(now: datetime, days: float, phrase: str) -> Window:
    slack = max(MIN_SLACK_DAYS, SLACK_SHARE * days)
    at = now - timedelta(days=days)
    return Window(at, at, timedelta(days=slack), phrase)


def resolve(text: str, now: datetime) -> Window | None:
    """The first relative period ``text`` names, counted back from ``now``; ``None`` if it
    names none. ``now`` must be timezone-aware."""
    if m := _AGO.search(text):
        days = _count(m.group(1)) * _UNIT_DAYS[m.group(2).lower()]
        return _point(now, days, m.group(0))
    if m := _LAST_DAY.search(text):
        name = m.group(1).lower()
        if name == "weekend":
            # The Saturday before the most recent Sunday, with both days in the slack.
            back = (now.weekday() - 5) % 7 or 7
            at = now - timedelta(days=back - 0.5)
            return Window(at, at, timedelta(days=MIN_SLACK_DAYS), m.group(0))
        back = (now.weekday() - _WEEKDAYS.index(name)) % 7 or 7
        at = now - timedelta(days=back)
        return Window(at, at, timedelta(days=1.0), m.group(0))
    if m := _YESTERDAY.search(text):
        at = now - timedelta(days=1)
        return Window(at, at, timedelta(days=1.0), m.group(0))
    return None


# --- dates ---------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _Mention:
    """One date as written: a year (or ``None``), a first and a last (month, day)."""

    year: int | None
    first: tuple[int, int]
    last: tuple[int, int]
    slack: float
    start: int
    end: int


def _last_day(month: int, year: int | None) -> int:
    return calendar.monthrange(year or 2000, month)[1]  # 2000: a leap year, so 29 February


def _mention(m: re.Match[str]) -> _Mention | None:
    """The date one match of :data:`_DATE` names, or ``None`` when it is no real date (31
    April) or a bare ambiguous month name ("may")."""
    g = m.groupdict()
    if g["iy"]:
        year, month, day = int(g["iy"]), int(g["im"]), int(g["id"])
        if not 1 <= month <= 12 or not 1 <= day <= _last_day(month, year):
            return None
        return _Mention(year, (month, day), (month, day), DAY_SLACK_DAYS, m.start(), m.end())
    for d, mo, y in (("ad", "am", "ay"), ("bd", "bm", "by")):
        if g[mo]:
            month, day = _MONTHS[g[mo].lower()], int(g[d])
            known = int(g[y]) if g[y] else None
            if not 1 <= day <= _last_day(month, known):
                return None
            return _Mention(known, (month, day), (month, day), DAY_SLACK_DAYS, m.start(),
                            m.end())
    if g["cs"]:
        first, last = _SEASONS[g["cs"].lower()]
        year = int(g["cy"])
        return _Mention(year, (first, 1), (last, _last_day(last, year)), MONTH_SLACK_DAYS,
                        m.start(), m.end())
    if g["em"]:
        name = g["em"].lower()
        if name in _AMBIGUOUS and not (g["ep"] or g["ey"]):
            return None
        month = _MONTHS[name]
        known = int(g["ey"]) if g["ey"] else None
        return _Mention(known, (month, 1), (month, _last_day(month, known)), MONTH_SLACK_DAYS,
                        m.start("em"), m.end())
    year = int(g["fy"])
    return _Mention(year, (1, 1), (12, 31), YEAR_SLACK_DAYS, m.start(), m.end())


def _span(year: int, first: tuple[int, int], last: tuple[int, int]) -> tuple[datetime, datetime]:
    """From the first day's start to the last day's end; a last day before the first falls
    in the next year. Days past a month's end (29 February) fall back to its last day."""
    end_year = year + 1 if last < first else year
    start = datetime(year, first[0], min(first[1], _last_day(first[0], year)), tzinfo=UTC)
    end = datetime(end_year, last[0], min(last[1], _last_day(last[0], end_year)), tzinfo=UTC)
    return start, end + timedelta(days=1) - timedelta(seconds=1)


def _period(first: _Mention, last: _Mention, phrase: str) -> Period:
    slack = timedelta(days=max(first.slack, last.slack))
    year = first.year if first.year is not None else last.year
    if year is None:
        return Yearly(first.first, last.last, slack, phrase)
    if first.year is None and last.last < first.first:
        year -= 1  # "from November to March 2023": November 2022 to March 2023
    if last.year is not None and last.year > year:
        start, _ = _span(year, first.first, first.first)
        _, end = _span(last.year, last.last, last.last)
    else:
        start, end = _span(year, first.first, last.last)
    return Window(start, end, slack, phrase)


def dates(text: str) -> list[Period]:
    """The dates ``text`` names, in order; a range ("from July to October") is one period."""
    found = [x for m in _DATE.finditer(text) if (x := _mention(m)) is not None]
    out: list[Period] = []
    i = 0
    while i < len(found):
        here = found[i]
        after = found[i + 1] if i + 1 < len(found) else None
        if (after is not None and _RANGE_JOIN.fullmatch(text[here.end:after.start])
                and _RANGE_OPEN.search(text[:here.start])):
            out.append(_period(here, after, text[here.start:after.end]))
            i += 2
            continue
        out.append(_period(here, here, text[here.start:here.end]))
        i += 1
    return out


def parse_instant(value: str | None) -> datetime | None:
    """An RFC 3339 instant as stored by the service, or ``None`` when absent or unreadable."""
    if not value:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _near(start: datetime, end: datetime, slack: timedelta, when: datetime) -> float:
    if start <= when <= end:
        return 1.0
    distance = (start - when) if when < start else (when - end)
    return max(0.0, 1.0 - distance.total_seconds() / slack.total_seconds())


def closeness(period: Period, when: datetime) -> float:
    """1.0 inside the period, falling linearly to 0.0 at ``slack`` beyond its ends."""
    if isinstance(period, Window):
        return _near(period.start, period.end, period.slack, when)
    return max(_near(*_span(year, period.start, period.end), period.slack, when)
               for year in (when.year - 1, when.year, when.year + 1))


__all__ = ["DAY_SLACK_DAYS", "MIN_SLACK_DAYS", "MONTH_SLACK_DAYS", "SLACK_SHARE",
           "YEAR_SLACK_DAYS", "Period", "Window", "Yearly", "closeness", "dates",
           "parse_instant", "resolve"]
