"""Relative time expressions resolved against a session date into an ISO date or interval.

dateparser (with RELATIVE_BASE) does the resolving and tells the granularity (day, week, month,
year); this module turns that granularity into an interval and covers what dateparser leaves
out: weekends, seasons, "a few days ago", "the week before". Durations ("three weeks", "a while")
are not points in time and resolve to nothing.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from functools import lru_cache

from dateparser.date import DateDataParser

_WEEKDAYS = "monday|tuesday|wednesday|thursday|friday|saturday|sunday"
_MONTHS = (
    "january|february|march|april|may|june|july|august|september|october|november|december"
    "|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec"
)
_SEASONS = {"spring": (3, 5), "summer": (6, 8), "autumn": (9, 11), "fall": (9, 11), "winter": (12, 2)}
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "couple of": 2, "a couple of": 2}

# A date written month/day, as people type it ("on 2/8", "2/15/2023"; month first, as dateparser
# reads English): a real month and day only, so "1/2 cup" needs the preposition to count.
_NUMERIC_DATE = r"(?:1[0-2]|0?[1-9])/(?:3[01]|[12]\d|0?[1-9])"
_NUMERIC_YEAR = r"/(?:\d{4}|\d{2})"

# A typed date ("2/8", "12/25/2022") names a day of the calendar, whatever the date it is said on; with its year, outright.
NUMERIC_DATE = re.compile(rf"\b{_NUMERIC_DATE}(?:{_NUMERIC_YEAR})?\b")
NUMERIC_WITH_YEAR = re.compile(rf"\b{_NUMERIC_DATE}{_NUMERIC_YEAR}\b")

# Words that make an expression a point in time rather than a duration.
ANCHOR = re.compile(
    rf"\b(ago|last|next|this|yesterday|today|tonight|tomorrow|weekend|morning|evening|afternoon|night"
    rf"|{_WEEKDAYS}|{_MONTHS}|spring|summer|autumn|fall|winter|\d{{4}}|\d{{1,2}}(st|nd|rd|th)|before|earlier|previous"
    rf"|{_NUMERIC_DATE}(?:{_NUMERIC_YEAR})?)\b",
    re.IGNORECASE,
)

# Relative expressions the small NER model sometimes misses; used to find spans in text.
RELATIVE_PATTERN = re.compile(
    rf"\b(yesterday|today|tonight|tomorrow|the day before yesterday"
    rf"|(?:last|this|next) (?:week|weekend|month|year|night|morning|evening|{_WEEKDAYS}|spring|summer|autumn|fall|winter)"
    rf"|(?:a|an|one|two|three|four|five|six|seven|eight|nine|ten|a few|a couple of|few|couple of|\d+) "
    rf"(?:days?|weeks?|weekends?|months?|years?) ago"
    rf"|(?:in|on|during) (?:{_MONTHS}|{_WEEKDAYS})(?: \d{{4}})?"
    rf"|(?:on|by|since|until|from) {_NUMERIC_DATE}(?:{_NUMERIC_YEAR})?|{_NUMERIC_DATE}{_NUMERIC_YEAR})\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class ResolvedTime:
    text: str
    start: date
    end: date

    @property
    def iso(self) -> str:
        return self.start.isoformat() if self.start == self.end else f"{self.start.isoformat()}/{self.end.isoformat()}"


@lru_cache(maxsize=256)
def _parser(base: datetime, prefer: str) -> DateDataParser:
    # One parser per session date: building one costs far more than parsing with it.
    return DateDataParser(
        languages=["en"],
        settings={"RELATIVE_BASE": base, "PREFER_DATES_FROM": prefer, "RETURN_TIME_AS_PERIOD": True},
    )


def _week(day: date) -> tuple[date, date]:
    monday = day - timedelta(days=day.weekday())
    return monday, monday + timedelta(days=6)


def _month(day: date) -> tuple[date, date]:
    return day.replace(day=1), day.replace(day=calendar.monthrange(day.year, day.month)[1])


def _year(day: date) -> tuple[date, date]:
    return date(day.year, 1, 1), date(day.year, 12, 31)


def _weekend_of(monday: date) -> tuple[date, date]:
    saturday = monday + timedelta(days=5)
    return saturday, saturday + timedelta(days=1)


def _season(name: str, year: int) -> tuple[date, date]:
    first, last = _SEASONS[name]
    if first > last:  # winter spans the new year: Dec of `year` to Feb of the next
        return date(year, 12, 1), _month(date(year + 1, 2, 1))[1]
    return date(year, first, 1), _month(date(year, last, 1))[1]


def _special(expr: str, base: date) -> tuple[date, date] | None:
    e = expr.lower().strip()
    e = re.sub(r"^(on|in|during|over|at) (the )?", "", e)
    this_monday = _week(base)[0]
    if m := re.fullmatch(r"(this|last|next|the)? ?weekend", e):
        which = m.group(1) or "this"
        # "this weekend" on Monday or Tuesday means the one just past; later in the week, the coming one.
        this = _weekend_of(this_monday - timedelta(days=7)) if base.weekday() <= 1 else _weekend_of(this_monday)
        if which == "last":
            return _weekend_of(this_monday - timedelta(days=7))
        if which == "next":
            return this[0] + timedelta(days=7), this[1] + timedelta(days=7)
        return this
    if m := re.fullmatch(r"(a|an|one|two|three|four|five|six|\d+) weekends? ago", e):
        n = _NUMBERS.get(m.group(1)) or int(m.group(1))
        return _weekend_of(this_monday - timedelta(days=7 * n))
    if re.fullmatch(r"(a few|few|several) days ago", e):
        return base - timedelta(days=5), base - timedelta(days=2)
    if re.fullmatch(r"(a )?couple( of)? days ago", e):
        return base - timedelta(days=3), base - timedelta(days=2)
    if re.fullmatch(r"(a few|few|several) weeks ago", e):
        return base - timedelta(days=28), base - timedelta(days=14)
    if re.fullmatch(r"(a few|few|several) months ago", e):
        return _month(base - timedelta(days=120))[0], _month(base - timedelta(days=60))[1]
    if re.fullmatch(r"(the )?(week before|previous week)", e):
        return _week(base - timedelta(days=7))
    if re.fullmatch(r"(earlier |later )?this month", e):
        return _month(base)
    if re.fullmatch(r"(earlier |later )?this year", e):
        return _year(base)
    if m := re.fullmatch(r"(this|last|next)? ?(spring|summer|autumn|fall|winter)", e):
        which, season = m.group(1), m.group(2)
        year = base.year
        start, end = _season(season, year)
        if which == "last" or (which is None and start > base):
            if end >= base or which is None:
                start, end = _season(season, year - 1)
        elif which == "next" and start <= base:
            start, end = _season(season, year + 1)
        return start, end
    return None


def _full_year(two_digits: int, base_year: int) -> int:
    century = base_year - base_year % 100
    return min((century - 100 + two_digits, century + two_digits, century + 100 + two_digits), key=lambda y: abs(y - base_year))


def resolve(expression: str, base: datetime | date, *, prefer: str = "past") -> ResolvedTime | None:
    """Resolve ``expression`` said at ``base``; ``prefer`` ("past"/"future") settles "in June" and the like."""
    text = " ".join(expression.split())
    if not text or not ANCHOR.search(text):
        return None
    base_date = base.date() if isinstance(base, datetime) else base
    special = _special(text, base_date)
    if special:
        return ResolvedTime(text, *special)
    base_dt = base if isinstance(base, datetime) else datetime(base.year, base.month, base.day, 12)
    cleaned = re.sub(r"^(on|in|during|at|by|since|until|from) (the )?", "", text, flags=re.IGNORECASE)
    # "4/3/23": the century that puts the year nearest the base (dateparser would read 1923 as "past").
    cleaned = re.sub(rf"\b({_NUMERIC_DATE})/(\d{{2}})\b", lambda m: f"{m.group(1)}/{_full_year(int(m.group(2)), base_dt.year)}", cleaned)
    try:
        data = _parser(base_dt, prefer).get_date_data(cleaned)
    except (ValueError, OverflowError):
        return None
    if data.date_obj is None:
        return None
    day = data.date_obj.date()
    period = data.period or "day"
    if period == "week":
        start, end = _week(day)
    elif period == "month":
        start, end = _month(day)
    elif period == "year":
        start, end = _year(day)
    else:
        start = end = day
    return ResolvedTime(text, start, end)
