"""When a question is about: a window of days from its time expressions, resolved against its date.

"What did I buy 10 days ago?", "last Saturday", "in January", "on Valentine's day", "in the past
three months", "yesterday", "this year": each gives a window (first and last day) with a tolerance
that grows with vagueness ("a month ago" is not one day: two weeks either side) and a sureness
(an exact day 1.0, a month 0.8, "recently" 0.4). No time expression: no window. Pure; relative
expressions resolve with the extractor's own resolver (``extraction.timex``), so "last week" in a
question means the days it means in a turn.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta

_NUMBER_WORDS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
                 "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "a couple of": 2, "couple of": 2, "a few": 3, "few": 3,
                 "several": 4}
_NUMBER = r"(\d+|a couple of|couple of|a few|few|several|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
_UNIT_DAYS = {"day": 1, "week": 7, "month": 30, "year": 365}
_MONTH_NAMES = {name: i for i, name in enumerate(calendar.month_name) if name} | {
    name: i for i, name in enumerate(calendar.month_abbr) if name}
_MONTH = "|".join(sorted((m.lower() for m in _MONTH_NAMES), key=len, reverse=True)) + "|sept"
_WEEKDAY = "monday|tuesday|wednesday|thursday|friday|saturday|sunday"


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
    n, days = _count(number), _UNIT_DAYS[unit.lower().rstrip("s")]
    centre = asked - timedelta(days=round(n * days))
    vague = number.lower() in ("a few", "few", "several", "a couple of", "couple of")
    # A day is a day (give or take one); a week, month or year ago is fuzzier the more of them there are.
    half = {1: 0, 7: 2, 30: 7, 365: 60}[days] + (n * days * 0.1 if days > 1 else n * 0.1)
    half *= 1.5 if vague else 1.0
    tolerance = {1: 1, 7: 3, 30: 10, 365: 60}[days] * (1.5 if vague else 1.0)
    sure = {1: 1.0, 7: 0.9, 30: 0.8, 365: 0.6}[days] * (0.8 if vague else 1.0)
    return Window(centre - timedelta(days=round(half)), min(asked, centre + timedelta(days=round(half))), tolerance, sure, text)


def _last_weekday(name: str, asked: date) -> date:
    """The most recent ``name`` day before ``asked`` (a week back when it is that day)."""
    wanted = list(calendar.day_name).index(name.capitalize())
    back = (asked.weekday() - wanted) % 7 or 7
    return asked - timedelta(days=back)


def _most_recent_month(month: int, asked: date, year: int | None) -> tuple[date, date]:
    if year is None:
        year = asked.year if month <= asked.month else asked.year - 1
    return date(year, month, 1), date(year, month, calendar.monthrange(year, month)[1])


def _nth_weekday(year: int, month: int, weekday: int, n: int) -> date:
    """The ``n``-th ``weekday`` of a month (n = -1: the last)."""
    days = [d for d in range(1, calendar.monthrange(year, month)[1] + 1) if date(year, month, d).weekday() == weekday]
    return date(year, month, days[n])


def _easter(year: int) -> date:
    """Western Easter Sunday (the anonymous Gregorian computus)."""
    a, b, c = year % 19, year // 100, year % 100
    d, e = b // 4, b % 4
    f = (b + 8) // 25
    g = (b - f + 1) // 3
    h = (19 * a + b - d - g + 15) % 30
    i, k = c // 4, c % 4
    m = (32 + 2 * e + 2 * i - h - k) % 7
    n = (a + 11 * h + 22 * m) // 451
    month = (h + m - 7 * n + 114) // 31
    return date(year, month, (h + m - 7 * n + 114) % 31 + 1)


# Holidays by the day they fall on in a year.
HOLIDAYS = {
    r"valentine'?s(?: day)?": lambda y: date(y, 2, 14),
    r"christmas eve": lambda y: date(y, 12, 24),
    r"christmas(?: day)?": lambda y: date(y, 12, 25),
    r"new year'?s eve": lambda y: date(y, 12, 31),
    r"new year'?s(?: day)?": lambda y: date(y, 1, 1),
    r"halloween": lambda y: date(y, 10, 31),
    r"(?:the )?(?:fourth|4th) of july|independence day": lambda y: date(y, 7, 4),
    r"thanksgiving": lambda y: _nth_weekday(y, 11, 3, 3),
    r"easter(?: sunday)?": _easter,
    r"mother'?s day": lambda y: _nth_weekday(y, 5, 6, 1),
    r"father'?s day": lambda y: _nth_weekday(y, 6, 6, 2),
    r"memorial day": lambda y: _nth_weekday(y, 5, 0, -1),
    r"labou?r day": lambda y: _nth_weekday(y, 9, 0, 0),
    r"st\.? patrick'?s day": lambda y: date(y, 3, 17),
}


def _holiday(pattern: str, asked: date) -> date:
    day = HOLIDAYS[pattern](asked.year)
    return day if day <= asked else HOLIDAYS[pattern](asked.year - 1)


def _day_of_month(month: int, day: int, asked: date, year: int | None) -> date | None:
    years = [year] if year else list(range(asked.year, asked.year - 5, -1))  # 29 February: back to the last leap year
    for y in years:
        try:
            candidate = date(y, month, day)
        except ValueError:  # 29 February of a year that has none
            continue
        if year or candidate <= asked:
            return candidate
    return None


def _rules(q: str, asked: date):
    """(position, window) of every expression found, in the order the rules are tried."""
    for m in re.finditer(rf"\b{_NUMBER} (day|week|month|year)s? ago\b", q):
        yield m.start(), _ago(m.group(1), m.group(2), asked, m.group(0))
    for m in re.finditer(rf"\b(?:in|over|during|within) the (?:last|past) (?:{_NUMBER} )?(day|week|month|year)s?\b", q):
        n = _count(m.group(1)) if m.group(1) else 1.0
        span = round(n * _UNIT_DAYS[m.group(2)])
        yield m.start(), Window(asked - timedelta(days=span), asked, max(1.0, span * 0.1), 0.9, m.group(0))
    for m in re.finditer(r"(?<!most )\b(recently|lately|these days|nowadays)\b", q):
        yield m.start(), Window(asked - timedelta(days=30), asked, 30.0, 0.4, m.group(0))
    for m in re.finditer(rf"\blast ({_WEEKDAY})\b", q):
        day = _last_weekday(m.group(1), asked)
        yield m.start(), Window(day, day, 1.0, 1.0, m.group(0))
    for pattern in HOLIDAYS:
        for m in re.finditer(rf"\b(?:on|for|at|during|over|around) ({pattern})\b", q):
            day = _holiday(pattern, asked)
            yield m.start(), Window(day, day, 2.0, 1.0, m.group(0), calendar=True)
    for m in re.finditer(rf"\b(?:on )?(?:the )?({_MONTH})\.? (\d{{1,2}})(?:st|nd|rd|th)?(?:,?\s*(\d{{4}}))?\b"
                         rf"|\b(?:on )?(?:the )?(\d{{1,2}})(?:st|nd|rd|th)? (?:of )?({_MONTH})(?:,?\s*(\d{{4}}))?\b", q):
        month_name, day_text, year_text = (m.group(1), m.group(2), m.group(3)) if m.group(1) else (m.group(5), m.group(4), m.group(6))
        day = _day_of_month(_month_number(month_name), int(day_text), asked, int(year_text) if year_text else None)
        if day is not None:
            yield m.start(), Window(day, day, 1.0, 1.0, m.group(0), calendar=True, year_said=year_text is not None)
    for m in re.finditer(rf"\b(early|mid|late|the (?:beginning|start|middle|end) of) ({_MONTH})(?:,? (\d{{4}}))?\b", q):
        first, last = _most_recent_month(_month_number(m.group(2)), asked, int(m.group(3)) if m.group(3) else None)
        part = m.group(1)
        if part in ("early", "the beginning of", "the start of"):
            first, last = first, first + timedelta(days=10)
        elif part in ("mid", "the middle of"):
            first, last = first + timedelta(days=10), first + timedelta(days=20)
        else:
            first = last - timedelta(days=10)
        yield m.start(), Window(first, last, 5.0, 0.8, m.group(0), calendar=True, year_said=m.group(3) is not None)
    for m in re.finditer(rf"\b(?:between|from) ({_MONTH})(?:,? (\d{{4}}))? (?:and|to|until|till) ({_MONTH})(?:,? (\d{{4}}))?\b", q):
        second = _most_recent_month(_month_number(m.group(3)), asked, int(m.group(4)) if m.group(4) else None)
        first = _most_recent_month(_month_number(m.group(1)), second[1], int(m.group(2)) if m.group(2) else None)
        yield m.start(), Window(first[0], second[1], 5.0, 0.9, m.group(0), calendar=True,
                                year_said=m.group(2) is not None or m.group(4) is not None)
    for m in re.finditer(rf"\b(?:in|during|throughout|of) ({_MONTH})(?:,? (\d{{4}}))?\b", q):
        first, last = _most_recent_month(_month_number(m.group(1)), asked, int(m.group(2)) if m.group(2) else None)
        yield m.start(), Window(first, last, 5.0, 0.8, m.group(0), calendar=True, year_said=m.group(2) is not None)
    from seem_dagster.episodic.extraction import timex  # dateparser loads on the first question that needs it

    for m in timex.RELATIVE_PATTERN.finditer(q):
        resolved = timex.resolve(m.group(0), asked)
        if resolved is not None and resolved.start <= asked:
            days = (resolved.end - resolved.start).days + 1
            yield m.start(), Window(resolved.start, min(resolved.end, asked), 1.0 if days == 1 else min(10.0, days / 3),
                                    1.0 if days <= 2 else 0.9 if days <= 9 else 0.8, m.group(0),
                                    calendar=timex.NUMERIC_DATE.search(m.group(0)) is not None,
                                    year_said=timex.NUMERIC_WITH_YEAR.search(m.group(0)) is not None)
    for m in re.finditer(r"\b(?:this|so far this) year\b", q):
        yield m.start(), Window(date(asked.year, 1, 1), asked, 15.0, 0.6, m.group(0))
    for m in re.finditer(r"\blast year\b", q):
        yield m.start(), Window(date(asked.year - 1, 1, 1), date(asked.year - 1, 12, 31), 30.0, 0.7, m.group(0))


def _month_number(name: str) -> int:
    name = name.lower().rstrip(".")
    return {m.lower(): i for m, i in _MONTH_NAMES.items()}.get(name) or (9 if name == "sept" else 0)


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
