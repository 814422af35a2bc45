"""When a question is about: a window of days from its time expressions, resolved against its date.

"What did I buy 10 days ago?", "last Saturday", "in January", "on Valentine's day", "in the past
three months", "yesterday", "this year", and the other ways of saying such times ("a fortnight
ago", "this past weekend", "the Friday before last", "mid-March", "on the 15th", "in the spring",
"over the holidays", "since May"): each gives a window (first and last day) with a tolerance
that grows with vagueness ("a month ago" is not one day: two weeks either side) and a sureness
(an exact day 1.0, a month 0.8, "recently" 0.4). No time expression: no window. A question asks
about what is past, so a day or season named without "last" is the latest one begun by the
question's date ("this Monday", "in the summer"). Pure; relative
expressions resolve with the extractor's own resolver (``extraction.timex``), so "last week" in a
question means the days it means in a turn.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from seem_dagster.episodic.extraction.calendar_days import (
    AGO,
    COUNT,
    COUNTS,
    HOLIDAYS,
    MONTH,
    SEASON,
    WEEKDAY,
    day_of_month,
    holiday,
    last_day_numbered,
    last_or_today,
    last_season,
    last_weekday,
    month_number,
    month_span,
    part_of_named_month,
    season_span,
    the_holidays,
)

_NUMBER_WORDS = COUNTS | {"a few": 3, "few": 3, "several": 4}
_VAGUE_NUMBERS = {"a few", "few", "several", "a couple of", "couple of", "a couple", "couple"}
_NUMBER = rf"({COUNT}|a few|few|several)"
# Per unit: its days, then for "N units ago" the half-width of the window around the day it points to, the
# tolerance beyond it and how sure the reading is (a day is a day, give or take one; a week, month or year ago
# is fuzzier, the more so the more of them there are: see _ago).
_UNITS = {"day": (1, 0, 1, 1.0), "week": (7, 2, 3, 0.9), "fortnight": (14, 3, 4, 0.9), "month": (30, 7, 10, 0.8),
          "year": (365, 60, 60, 0.6)}
_UNIT_DAYS = {unit: spec[0] for unit, spec in _UNITS.items()}
_UNIT = "|".join(_UNITS)


@dataclass(frozen=True)
class Window:
    start: date  # first day it is about
    end: date  # last day it is about
    tolerance: float  # days outside it that still count as near (the window's vagueness)
    sure: float  # how sure the reading is: 1.0 an exact day ... 0.4 "recently"
    text: str  # the words it came from
    # The question names the calendar: a month, a day of a month, a holiday or a typed date, its year taken from the
    # question's date when unsaid ("in February", "on March 15th", "on 2/8", "on 16 June, 2023"). Such a time does not
    # move with the day a question is worded from; one counted from that day ("last week", "10 days ago") does.
    calendar: bool = False
    year_said: bool = False  # a calendar time whose year the question says ("in May 2023", "12/25/2022")

    def distance(self, first: date, last: date) -> float:
        """Days between the window and the span [first, last] (0 when they meet)."""
        if last < self.start:
            return float((self.start - last).days)
        if first > self.end:
            return float((first - self.end).days)
        return 0.0

    def nearness(self, first: date, last: date) -> float:
        """1 inside the window, falling linearly to 0 at ``tolerance`` days beyond its edges."""
        gap = self.distance(first, last)
        if gap == 0.0:
            return 1.0
        return max(0.0, 1.0 - gap / (self.tolerance + 1.0))


def _count(word: str) -> float:
    word = word.lower()
    return float(word) if word.isdigit() else float(_NUMBER_WORDS[word])


def _ago(number: str, unit: str, asked: date, text: str) -> Window:
    n = _count(number)
    days, half, tolerance, sure = _UNITS[unit.lower().rstrip("s")]
    centre = asked - timedelta(days=round(n * days))
    vague = number.lower() in _VAGUE_NUMBERS
    half = (half + (n * days * 0.1 if days > 1 else n * 0.1)) * (1.5 if vague else 1.0)
    tolerance *= 1.5 if vague else 1.0
    sure *= 0.8 if vague else 1.0
    return Window(centre - timedelta(days=round(half)), min(asked, centre + timedelta(days=round(half))), tolerance, sure, text)


def _each(pattern: str | re.Pattern, q: str, window):
    """(position, window(match)) for each match of ``pattern`` that names a time (``window`` gives None
    when it does not). One whose days the calendar cannot hold ("3000 years ago", "winter 9999", "in May
    0000": before year 1 or past 9999) names none and is passed over; the others are still read."""
    for m in re.finditer(pattern, q):
        try:
            found = window(m)
        except (ValueError, OverflowError):
            continue
        if found is not None:
            yield m.start(), found


def _rules(q: str, asked: date):
    """(position, window) of every expression found, in the order the rules are tried."""
    def year(text: str | None) -> int | None:
        return int(text) if text else None

    yield from _each(rf"\b{_NUMBER} ({_UNIT})s? {AGO}", q, lambda m: _ago(m.group(1), m.group(2), asked, m.group(0)))

    def within(m):
        n = _count(m.group(1)) if m.group(1) else 1.0
        span = round(n * _UNIT_DAYS[m.group(2)])
        return Window(asked - timedelta(days=span), asked, max(1.0, span * 0.1), 0.9, m.group(0))

    yield from _each(rf"\b(?:(?:in|over|during|within) the|this) (?:last|past) (?:{_NUMBER} )?({_UNIT})s?\b", q, within)
    yield from _each(r"(?<!most )\b(recently|lately|these days|nowadays)\b", q,
                     lambda m: Window(asked - timedelta(days=30), asked, 30.0, 0.4, m.group(0)))

    def one_day(day: date | None, m, tolerance: float = 1.0, sure: float = 1.0, **kinds) -> Window | None:
        return Window(day, day, tolerance, sure, m.group(0), **kinds) if day is not None else None

    yield from _each(rf"\blast ({WEEKDAY})\b", q, lambda m: one_day(last_weekday(m.group(1), asked), m))
    # "this Monday": a question asks about the past, so the last one, today included.
    yield from _each(rf"\bthis ({WEEKDAY})\b", q, lambda m: one_day(last_or_today(m.group(1), asked), m))
    for pattern in HOLIDAYS:
        yield from _each(rf"\b(?:on|for|at|during|over|around|last|this past) ({pattern})\b", q,
                         lambda m, pattern=pattern: one_day(holiday(pattern, asked), m, 2.0, calendar=True))

    def holidays(m):
        first, last = the_holidays(asked)
        return Window(first, min(asked, last), 7.0, 0.5, m.group(0), calendar=True)

    yield from _each(r"\b(?:over|during|for|around) the (?:holidays|holiday season)\b", q, holidays)

    def month_day(m):
        month_name, day_text, year_text = (m.group(1), m.group(2), m.group(3)) if m.group(1) else (m.group(5), m.group(4), m.group(6))
        day = day_of_month(month_number(month_name), int(day_text), asked, year(year_text))
        return one_day(day, m, calendar=True, year_said=year_text is not None)

    yield from _each(rf"\b(?:on )?(?:the )?({MONTH})\.? (\d{{1,2}})(?:st|nd|rd|th)?(?:,?\s*(\d{{4}}))?\b"
                     rf"|\b(?:on )?(?:the )?(\d{{1,2}})(?:st|nd|rd|th)? (?:of )?({MONTH})(?:,?\s*(\d{{4}}))?\b", q, month_day)
    # "on the 15th": the last such day of a month, when nothing names a month ("the 15th floor", "the 20th of May" do).
    yield from _each(r"\bon the (\d{1,2})(?:st|nd|rd|th)(?=\s*(?:[?.!,;:]|$|(?:and|or|when|while|at|with|so|but)\b))", q,
                     lambda m: one_day(last_day_numbered(int(m.group(1)), asked), m, sure=0.9, calendar=True))

    def part_of_month(m):
        first, last = part_of_named_month(m.group(1).removeprefix("the ").removesuffix(" of"), month_number(m.group(2)), asked,
                                          year(m.group(3)))
        return Window(first, last, 5.0, 0.8, m.group(0), calendar=True, year_said=m.group(3) is not None)

    yield from _each(rf"\b(early|mid|late|the (?:beginning|start|middle|end) of)[- ]({MONTH})(?:,? (\d{{4}}))?\b", q, part_of_month)

    def between(m):
        second = month_span(month_number(m.group(3)), asked, year(m.group(4)))
        first = month_span(month_number(m.group(1)), second[1], year(m.group(2)))
        return Window(first[0], second[1], 5.0, 0.9, m.group(0), calendar=True, year_said=m.group(2) is not None or m.group(4) is not None)

    yield from _each(rf"\b(?:between|from) ({MONTH})(?:,? (\d{{4}}))? (?:and|to|until|till) ({MONTH})(?:,? (\d{{4}}))?\b", q, between)

    def since(m):
        first, _ = month_span(month_number(m.group(1)), asked, year(m.group(2)))
        return Window(first, asked, 5.0, 0.7, m.group(0), calendar=True, year_said=m.group(2) is not None)

    yield from _each(rf"\bsince ({MONTH})(?:,? (\d{{4}}))?\b", q, since)

    def in_month(m):
        first, last = month_span(month_number(m.group(1)), asked, year(m.group(2)))
        return Window(first, last, 5.0, 0.8, m.group(0), calendar=True, year_said=m.group(2) is not None)

    yield from _each(rf"\b(?:in|during|throughout|of) ({MONTH})(?:,? (\d{{4}}))?\b", q, in_month)

    # A season: the last one begun by the question's date ("in the spring", "this winter"), or of the year said.
    def season(m):
        name, year_text = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
        first, last = season_span(name, int(year_text)) if year_text else last_season(name, asked)
        return Window(first, last, 15.0, 0.6, m.group(0), calendar=True, year_said=year_text is not None)

    yield from _each(rf"\b(?:(?:in|during|over|throughout|this) (?:the )?({SEASON})(?:,?(?: of)? (\d{{4}}))?|({SEASON}),?(?: of)? (\d{{4}}))\b",
                     q, season)
    from seem_dagster.episodic.extraction import timex  # dateparser loads on the first question that needs it

    def relative(m):
        resolved = timex.resolve(m.group(0), asked)
        if resolved is None or resolved.start > asked:
            return None
        days = (resolved.end - resolved.start).days + 1
        return Window(resolved.start, min(resolved.end, asked), 1.0 if days == 1 else min(10.0, days / 3),
                      1.0 if days <= 2 else 0.9 if days <= 9 else 0.8, m.group(0),
                      calendar=timex.NUMERIC_DATE.search(m.group(0)) is not None,
                      year_said=timex.NUMERIC_WITH_YEAR.search(m.group(0)) is not None)

    yield from _each(timex.RELATIVE_PATTERN, q, relative)
    yield from _each(r"\b(?:this|so far this) year\b", q, lambda m: Window(date(asked.year, 1, 1), asked, 15.0, 0.6, m.group(0)))
    yield from _each(r"\blast year\b", q,
                     lambda m: Window(date(asked.year - 1, 1, 1), date(asked.year - 1, 12, 31), 30.0, 0.7, m.group(0)))


def question_window(question: str, asked: datetime | date) -> Window | None:
    """The days ``question`` is about, asked on ``asked``; None when it names no time. Of several
    expressions, one the question dates outright wins ("last Friday on 23 January, 2022": the date), then
    the most precise (the narrowest window), then the first said."""
    day = asked.date() if isinstance(asked, datetime) else asked
    q = " ".join(question.lower().replace("’", "'").split())
    found, covered = [], []
    for at, window in _rules(q, day):
        end = at + len(window.text)
        if any(a < end and at < b for a, b in covered):
            continue  # the same words read by a later, more general rule
        covered.append((at, end))
        found.append((at, window))
    if not found:
        return None
    _, best = min(found, key=lambda pw: (not pw[1].calendar, (pw[1].end - pw[1].start).days + pw[1].tolerance, pw[0]))
    return best
