"""Days of the calendar that time expressions name (pure): the last or next such weekday, month,
numbered day, season or holiday from a date, the parts of a month or year, and weeks, weekends and
months counted back. A turn's times (timex) and a question's (retrieval.question_time) both read
them here, so "the week before last" or "mid-March" means the same days in either."""

from __future__ import annotations

import calendar
import re
from datetime import date, timedelta

# Month names and their abbreviations (lower-cased) -> the month's number; MONTH matches any, longest first.
MONTH_NUMBERS = ({name.lower(): i for i, name in enumerate(calendar.month_name) if name}
                 | {abbr.lower(): i for i, abbr in enumerate(calendar.month_abbr) if abbr} | {"sept": 9})
MONTH = "|".join(sorted(MONTH_NUMBERS, key=len, reverse=True))


WEEKDAY = "monday|tuesday|wednesday|thursday|friday|saturday|sunday"
# Count words a number of days, weeks or weekdays is said with ("two Saturdays ago", "a couple weeks back").
COUNTS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
          "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "a couple of": 2, "couple of": 2, "a couple": 2, "couple": 2}
COUNT = "|".join(sorted(COUNTS, key=len, reverse=True)) + r"|\d+"


# "ago", or "back" where the phrase ends ("three days back."; not "two weeks back home", "back to back").
AGO = r"(?:ago|back(?=\s*(?:[.,;:!?)]|$|(?:and|but|when|so|then)\b)))"


def count_of(word: str) -> int:
    return COUNTS[word.lower()] if word.lower() in COUNTS else int(word)


def month_number(name: str) -> int:
    """"March", "mar", "Sept." -> 3, 3, 9."""
    return MONTH_NUMBERS[name.lower().rstrip(".")]


def last_weekday(name: str, base: date) -> date:
    """The most recent ``name`` day before ``base`` (a week back when it is that day)."""
    wanted = list(calendar.day_name).index(name.capitalize())
    back = (base.weekday() - wanted) % 7 or 7
    return base - timedelta(days=back)


def last_or_today(name: str, base: date) -> date:
    """The last ``name`` day on or before ``base`` (a question's "this Monday": it asks about the past)."""
    wanted = list(calendar.day_name).index(name.capitalize())
    return base - timedelta(days=(base.weekday() - wanted) % 7)


def month_span(month: int, base: date, year: int | None = None) -> tuple[date, date]:
    """A month's first and last day: of ``year`` when said, else the last one begun by ``base``."""
    if year is None:
        year = base.year if month <= base.month else base.year - 1
    return date(year, month, 1), date(year, month, calendar.monthrange(year, month)[1])


def nth_weekday(year: int, month: int, weekday: int, n: int) -> date:
    """The ``n``-th ``weekday`` of a month (n = -1: the last)."""
    days = [d for d in range(1, calendar.monthrange(year, month)[1] + 1) if date(year, month, d).weekday() == weekday]
    return date(year, month, days[n])


def easter(year: int) -> date:
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


# Holidays by the day they fall on in a year (patterns over lower-cased text, either apostrophe).
HOLIDAYS = {
    r"valentine['’]?s(?: day)?": lambda y: date(y, 2, 14),
    r"christmas eve": lambda y: date(y, 12, 24),
    r"christmas(?: day)?": lambda y: date(y, 12, 25),
    r"new year['’]?s eve": lambda y: date(y, 12, 31),
    r"new year['’]?s(?: day)?": lambda y: date(y, 1, 1),
    r"halloween": lambda y: date(y, 10, 31),
    r"(?:the )?(?:fourth|4th) of july|independence day": lambda y: date(y, 7, 4),
    r"thanksgiving": lambda y: nth_weekday(y, 11, 3, 3),
    r"easter(?: sunday)?": easter,
    r"mother['’]?s day": lambda y: nth_weekday(y, 5, 6, 1),
    r"father['’]?s day": lambda y: nth_weekday(y, 6, 6, 2),
    r"memorial day": lambda y: nth_weekday(y, 5, 0, -1),
    r"labou?r day": lambda y: nth_weekday(y, 9, 0, 0),
    r"st\.? patrick['’]?s day": lambda y: date(y, 3, 17),
}
HOLIDAY = "|".join(f"(?:{pattern})" for pattern in HOLIDAYS)


def holiday(pattern: str, base: date, prefer: str = "past") -> date:
    """The day of the holiday ``pattern`` (a key of HOLIDAYS) last on or before ``base`` (past), or next
    on or after it (future)."""
    day = HOLIDAYS[pattern](base.year)
    if prefer == "future":
        return day if day >= base else HOLIDAYS[pattern](base.year + 1)
    return day if day <= base else HOLIDAYS[pattern](base.year - 1)


def holiday_named(text: str) -> str | None:
    """The HOLIDAYS pattern that ``text`` (lower-cased) is, or None."""
    return next((pattern for pattern in HOLIDAYS if re.fullmatch(pattern, text)), None)


def the_holidays(base: date, prefer: str = "past") -> tuple[date, date]:
    """"The holidays": 20 December to 2 January, the last begun by ``base`` (past) or the next not over."""
    year = base.year if base >= date(base.year, 12, 20) else base.year - 1
    if prefer == "future" and date(year + 1, 1, 2) < base:
        year += 1
    return date(year, 12, 20), date(year + 1, 1, 2)


def day_of_month(month: int, day: int, base: date, year: int | None) -> date | None:
    """``month``/``day`` of ``year``, or the last such day on or before ``base`` (29 February: of the
    last leap year)."""
    years = [year] if year else list(range(base.year, base.year - 5, -1))
    for y in years:
        try:
            candidate = date(y, month, day)
        except ValueError:  # 29 February of a year that has none
            continue
        if year or candidate <= base:
            return candidate
    return None


def last_day_numbered(number: int, base: date) -> date | None:
    """The last day numbered ``number`` on or before ``base`` (the 31st: of the last month that has one)."""
    if number < 1:
        return None
    year, month = base.year, base.month
    for _ in range(12):
        if number <= calendar.monthrange(year, month)[1] and date(year, month, number) <= base:
            return date(year, month, number)
        year, month = (year, month - 1) if month > 1 else (year - 1, 12)
    return None


SEASONS = {"spring": (3, 5), "summer": (6, 8), "autumn": (9, 11), "fall": (9, 11), "winter": (12, 2)}
SEASON = "|".join(SEASONS)


def season_span(name: str, year: int) -> tuple[date, date]:
    """A season of ``year`` by whole months (northern hemisphere; winter from December to the next February)."""
    first_month, last_month = SEASONS[name]
    end_year = year + 1 if last_month < first_month else year
    return date(year, first_month, 1), date(end_year, last_month, calendar.monthrange(end_year, last_month)[1])


def next_season(name: str, base: date) -> tuple[date, date]:
    """The first ``name`` season not over by ``base`` (winter in January: the one under way)."""
    for year in (base.year - 1, base.year, base.year + 1):
        first, last = season_span(name, year)
        if last >= base:
            return first, last
    return season_span(name, base.year + 1)


def last_season(name: str, base: date) -> tuple[date, date]:
    """The last ``name`` season begun by ``base`` (ending there when not over)."""
    first, last = season_span(name, base.year)
    if first > base:
        first, last = season_span(name, base.year - 1)
    return first, min(last, base)


def part_of_month(part: str, first: date, last: date) -> tuple[date, date]:
    """The early, middle or late ten days or so of the month [first, last]; ``part``: early, mid or
    late, or beginning, start, middle or end."""
    if part in ("early", "beginning", "start"):
        return first, first + timedelta(days=10)
    if part in ("mid", "middle"):
        return first + timedelta(days=10), first + timedelta(days=20)
    return last - timedelta(days=10), last


def part_of_named_month(part: str, month: int, base: date, year: int | None, prefer: str = "past") -> tuple[date, date]:
    """"mid-March", "late May", "the end of June": the part of ``year``'s month when said, else the last
    such part begun by ``base`` (past) or the next not over (future): "late May" said on 10 May with a
    past verb is last year's."""
    if year is not None:
        return part_of_month(part, *month_span(month, base, year))
    for y in ((base.year, base.year - 1) if prefer == "past" else (base.year, base.year + 1)):
        start, end = part_of_month(part, *month_span(month, base, y))
        if (start <= base) if prefer == "past" else (end >= base):
            return start, end
    return start, end


# The months of a year's beginning, middle and end: its first two, the four around its middle, its last two.
YEAR_PARTS = {"beginning": (1, 2), "start": (1, 2), "middle": (5, 8), "end": (11, 12)}


def part_of_year(part: str, year: int) -> tuple[date, date]:
    """The months of ``year`` that its beginning, middle or end name (YEAR_PARTS)."""
    first, last = YEAR_PARTS[part]
    return date(year, first, 1), date(year, last, calendar.monthrange(year, last)[1])


def _shift_month(first: date, step: int) -> date:
    """The first day of the month ``step`` months from the month starting on ``first``."""
    index = first.year * 12 + first.month - 1 + step
    return date(index // 12, index % 12 + 1, 1)


def part_of_period(part: str, which: str, unit: str, base: date, prefer: str = "past") -> tuple[date, date] | None:
    """"the beginning of this month", "the end of last year", "the start of the year" (``which``:
    this, last, next or the): the part of ``base``'s month or year, or of the one before or after.
    With "the", the part of ``base``'s own period, or of the one before when it has not begun and
    ``prefer`` is past ("the end of the month" said on the 10th with a past verb: last month's); a
    part already over said of what is to come is None: "by the start of the year" in December is
    next year's, but "I've been going since the beginning of the month" reads as future to the tense
    rule, so no guess is made."""
    def span(step: int) -> tuple[date, date]:
        if unit == "month":
            first = _shift_month(base.replace(day=1), step)
            return part_of_month(part, first, first.replace(day=calendar.monthrange(first.year, first.month)[1]))
        return part_of_year(part, base.year + step)

    if which != "the":
        return span({"last": -1, "next": 1}.get(which, 0))
    start, end = span(0)
    if prefer == "past" and start > base:
        return span(-1)
    if prefer == "future" and end < base:
        return None
    return start, end


def back(unit: str, n: int, base: date) -> tuple[date, date]:
    """The ``n``-th last week (Monday to Sunday), weekend, month, year or named weekday before the one
    ``base`` falls in: "the week before last" is back("week", 2); a weekend or weekday not over yet
    does not count."""
    if unit == "weekend":
        sunday = base - timedelta(days=(base.weekday() + 1) % 7 or 7) - timedelta(days=7 * (n - 1))
        return sunday - timedelta(days=1), sunday
    if unit == "week":
        monday = base - timedelta(days=base.weekday() + 7 * n)
        return monday, monday + timedelta(days=6)
    if unit == "month":
        first = base.replace(day=1)
        for _ in range(n):
            first = (first - timedelta(days=1)).replace(day=1)
        return first, first.replace(day=calendar.monthrange(first.year, first.month)[1])
    if unit == "year":
        return date(base.year - n, 1, 1), date(base.year - n, 12, 31)
    day = last_weekday(unit, base) - timedelta(days=7 * (n - 1))
    return day, day
