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

from seem_dagster.episodic.extraction.calendar_days import (
    AGO,
    COUNT,
    HOLIDAY,
    MONTH,
    SEASON,
    WEEKDAY,
    back,
    count_of,
    holiday,
    holiday_named,
    month_number,
    next_season,
    part_of_named_month,
    part_of_period,
    season_span,
    the_holidays,
)

# "May" after "early" is as often the verb ("waking up early may help"): the month only with a hyphen, a year or at a clause's end.
_MONTH_NOT_MAY = "|".join(m for m in MONTH.split("|") if m != "may")
_PART_OF_MONTH = rf"(?:early|mid|late)(?:[- ](?:{_MONTH_NOT_MAY})|-may| may(?=,? \d{{4}}\b|\s*[.,;:!?)]|\s*$))"
# A season after in/during: "fall" only with its year ("I hurt my knee in the fall" is no season).
_SEASON_SAID = "spring|summer|autumn|winter"

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
    rf"|{WEEKDAY}|{MONTH}|{SEASON}|\d{{4}}|\d{{1,2}}(st|nd|rd|th)|before|earlier|previous|of the (?:month|year)"
    rf"|{HOLIDAY}|holidays|holiday season|{_NUMERIC_DATE}(?:{_NUMERIC_YEAR})?)\b",
    re.IGNORECASE,
)

# Relative expressions the small NER model sometimes misses; used to find spans in text.
RELATIVE_PATTERN = re.compile(
    rf"\b(yesterday|today|tonight|tomorrow|the day before yesterday"
    rf"|(?:last|this|next) (?:week|weekend|month|year|night|morning|evening|{WEEKDAY}|{SEASON})"
    rf"|(?:{COUNT}|a few|few|several) (?:days?|weeks?|fortnights?|weekends?|months?|years?) {AGO}|(?:{COUNT}) (?:{WEEKDAY})s {AGO}"
    rf"|the (?:week|weekend|month|{WEEKDAY}) before last|the previous (?:week|weekend|month|year)|(?:this|the) past weekend"
    rf"|{_PART_OF_MONTH}(?:,? \d{{4}})?"
    rf"|the (?:beginning|start|middle|end) of (?:(?:{MONTH})(?:,? \d{{4}})?|(?:this|last|next|the) (?:month|year))"
    rf"|(?:on|for|at|during|over|around|last|this|next) (?:{HOLIDAY})|(?:over|during|for|around) the (?:holidays|holiday season)"
    rf"|(?:in|during|over|throughout) (?:the )?(?:(?:{_SEASON_SAID})(?:,?(?: of)? \d{{4}})?|fall,?(?: of)? \d{{4}})"
    rf"|(?:{SEASON}),?(?: of)? \d{{4}}"
    rf"|(?:in|on|during) (?:{MONTH}|{WEEKDAY})(?: \d{{4}})?"
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


def _special(expr: str, base: date, prefer: str = "past") -> tuple[date, date] | None:
    e = expr.lower().strip()
    e = re.sub(r"^(on|in|during|over|at|for|around|throughout) (the )?", "", e)
    this_monday = _week(base)[0]
    calendar_named = _calendar_named(e, base, prefer)
    if calendar_named:
        return calendar_named
    if m := re.fullmatch(r"(this|last|next|the)? ?weekend", e):
        which = m.group(1) or "this"
        # "this weekend" on Monday or Tuesday means the one just past; later in the week, the coming one.
        this = _weekend_of(this_monday - timedelta(days=7)) if base.weekday() <= 1 else _weekend_of(this_monday)
        if which == "last":
            return _weekend_of(this_monday - timedelta(days=7))
        if which == "next":
            return this[0] + timedelta(days=7), this[1] + timedelta(days=7)
        return this
    if m := re.fullmatch(rf"({COUNT}) weekends? ago", e):
        n = count_of(m.group(1))
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
    if m := re.fullmatch(rf"(?:the )?(this|last|next)? ?({SEASON})", e):
        which, season = m.group(1), m.group(2)
        year = base.year
        start, end = season_span(season, year)
        if which is None and prefer == "future":  # "in the summer" of a plan: the next one not over
            return next_season(season, base)
        if which == "last" or (which is None and start > base):
            if end >= base or which is None:
                start, end = season_span(season, year - 1)
        elif which == "next" and start <= base:
            start, end = season_span(season, year + 1)
        return start, end
    return None


def _calendar_named(e: str, base: date, prefer: str) -> tuple[date, date] | None:
    """What calendar_days knows (``e``: lower-cased, its leading preposition cut): a part of a month
    or year, a holiday, the holidays, a season of a year said, weeks, weekends, months and weekdays
    counted back."""
    if m := re.fullmatch(rf"(?:(early|mid|late)[- ]|(?:the )?(beginning|start|middle|end) of )({MONTH})\.?(?:,? (\d{{4}}))?", e):
        return part_of_named_month(m.group(1) or m.group(2), month_number(m.group(3)), base,
                                   int(m.group(4)) if m.group(4) else None, prefer)
    if m := re.fullmatch(r"(?:the )?(beginning|start|middle|end) of (this|last|next|the) (month|year)", e):
        return part_of_period(m.group(1), m.group(2), m.group(3), base, prefer)
    if (m := re.fullmatch(rf"(?:(last|this|next) )?({HOLIDAY})", e)) and (pattern := holiday_named(m.group(2))):
        day = holiday(pattern, base, {"last": "past", "next": "future"}.get(m.group(1) or "", prefer))
        return day, day
    if re.fullmatch(r"(?:the )?(?:holidays|holiday season)", e):
        return the_holidays(base, prefer)
    if m := re.fullmatch(rf"(?:the )?({SEASON}),?(?: of)? (\d{{4}})", e):
        return season_span(m.group(1), int(m.group(2)))
    if m := re.fullmatch(rf"(?:the )?(week|weekend|month|{WEEKDAY}) before last", e):
        return back(m.group(1), 2, base)
    if m := re.fullmatch(r"(?:the )?previous (weekend|month|year)", e):
        return back(m.group(1), 1, base)
    if re.fullmatch(r"(?:this |the )?past weekend", e):
        return back("weekend", 1, base)
    if m := re.fullmatch(rf"({COUNT}) ({WEEKDAY})s ago", e):
        return back(m.group(2), count_of(m.group(1)), base)
    return None


def _full_year(two_digits: int, base_year: int) -> int:
    century = base_year - base_year % 100
    return min((century - 100 + two_digits, century + two_digits, century + 100 + two_digits), key=lambda y: abs(y - base_year))


def resolve(expression: str, base: datetime | date, *, prefer: str = "past") -> ResolvedTime | None:
    """Resolve ``expression`` said at ``base``; ``prefer`` ("past"/"future") settles "in June" and the like.
    An expression whose days the calendar cannot hold ("winter 9999" ends in year 10000, "in May 0000",
    "in 9000 years" said in 2200) names no time: None, never an error, whatever the words."""
    try:
        return _resolve(expression, base, prefer)
    except (ValueError, OverflowError):  # a year past 9999 or before 1, or a count of days no date reaches
        return None


def _resolve(expression: str, base: datetime | date, prefer: str) -> ResolvedTime | None:
    text = " ".join(expression.split())
    # "three days back", "a couple weeks ago", "Valentine’s Day": the words and counts the rules below read.
    said = re.sub(rf"\b((?:days?|weeks?|fortnights?|weekends?|months?|years?|(?:{WEEKDAY})s)) back$", r"\1 ago", text, flags=re.IGNORECASE)
    said = re.sub(r"\b(a )?couple (?=days? ago\b)", r"\1couple of ", said.replace("’", "'"), flags=re.IGNORECASE)
    said = re.sub(r"\b(?:a )?couple(?: of)? (?=(?:weeks?|fortnights?|months?|years?) ago\b)", "2 ", said, flags=re.IGNORECASE)
    if not said or not ANCHOR.search(said):
        return None
    base_date = base.date() if isinstance(base, datetime) else base
    special = _special(said, base_date, prefer)
    if special:
        return ResolvedTime(text, *special)
    base_dt = base if isinstance(base, datetime) else datetime(base.year, base.month, base.day, 12)
    cleaned = re.sub(r"^(on|in|during|at|by|since|until|from) (the )?", "", said, flags=re.IGNORECASE)
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
