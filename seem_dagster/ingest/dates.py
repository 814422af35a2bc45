"""Session and question dates as the benchmarks write them, parsed strictly, and the one range of
dates a memory holds.

The supported dates are FIRST (1900-01-01) to LAST (2200-12-31), at every entry: a file's turns and
questions, ``Memory.add``, ``seem query --date/--as-of``, the API's and the MCP tools' date
arguments. Why these: a conversation is said within living memory, and its plans reach a few
lifetimes ahead; around every such date the time-expression code (``episodic.extraction.timex``,
``retrieval.question_time``) counts days, weeks, months and years back and forth ("the winter before
last", "in 300 years"), and all of that must stay inside what Python's ``date`` holds (years 1 to
9999, where a year-9999 turn's "next week" overflows) and inside 64-bit nanosecond timestamps
(1677-09-21 to 2262-04-11: numpy's ``datetime64[ns]``, pandas, Parquet readers that use them). A
date outside is refused in one line naming where it came from, never stored.
"""

from __future__ import annotations

from datetime import date, datetime, timezone

LOCOMO_FORMAT = "%I:%M %p on %d %B, %Y"  # "1:56 pm on 8 May, 2023"
LONGMEMEVAL_FORMAT = "%Y/%m/%d (%a) %H:%M"  # "2023/07/01 (Sat) 02:36"

FIRST = datetime(1900, 1, 1)
LAST = datetime(2200, 12, 31, 23, 59, 59, 999999)
RANGE = f"{FIRST.date().isoformat()} to {LAST.date().isoformat()}"


class DateOutOfRange(ValueError):
    """A real date outside FIRST..LAST; its message says so in words a caller can show as they are."""


def check_range(moment: datetime | date) -> datetime | date:
    """``moment`` when it lies in the supported dates (FIRST to LAST), else DateOutOfRange."""
    day = moment.date() if isinstance(moment, datetime) else moment
    if not FIRST.date() <= day <= LAST.date():
        raise DateOutOfRange(f"{day.isoformat()} is outside the supported dates ({RANGE})")
    return moment


def parse_locomo(value: str) -> datetime:
    return check_range(datetime.strptime(value.strip(), LOCOMO_FORMAT))


def parse_longmemeval(value: str) -> datetime:
    return check_range(datetime.strptime(value.strip(), LONGMEMEVAL_FORMAT))


def parse_iso(value: str) -> datetime:
    """ISO 8601 date or date-time; an offset is converted to UTC and dropped, so all times compare.
    Raises ValueError (DateOutOfRange for a real date outside the supported ones)."""
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    parsed = datetime.fromisoformat(text)
    if parsed.tzinfo is not None:
        check_range(parsed.replace(tzinfo=None))  # before the conversion, which overflows at year 1 or 9999
        parsed = parsed.astimezone(timezone.utc).replace(tzinfo=None)
    return check_range(parsed)
