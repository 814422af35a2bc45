"""Session and question dates as the benchmarks write them, parsed strictly."""

from __future__ import annotations

from datetime import datetime, timezone

LOCOMO_FORMAT = "%I:%M %p on %d %B, %Y"  # "1:56 pm on 8 May, 2023"
LONGMEMEVAL_FORMAT = "%Y/%m/%d (%a) %H:%M"  # "2023/07/01 (Sat) 02:36"


def parse_locomo(value: str) -> datetime:
    return datetime.strptime(value.strip(), LOCOMO_FORMAT)


def parse_longmemeval(value: str) -> datetime:
    return datetime.strptime(value.strip(), LONGMEMEVAL_FORMAT)


def parse_iso(value: str) -> datetime:
    """ISO 8601 date or date-time; an offset is converted to UTC and dropped, so all times compare."""
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    parsed = datetime.fromisoformat(text)
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone(timezone.utc).replace(tzinfo=None)
    return parsed
