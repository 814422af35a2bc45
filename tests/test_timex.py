"""Relative time expressions resolved against fixed session dates."""

from datetime import datetime

import pytest

from seem_dagster.episodic.extraction.timex import resolve

MONDAY = datetime(2023, 5, 8, 13, 56)  # "1:56 pm on 8 May, 2023", a Monday
SATURDAY = datetime(2024, 3, 2, 19, 5)
THURSDAY = datetime(2023, 8, 17, 9, 0)

CASES = [
    ("yesterday", MONDAY, "past", "2023-05-07"),
    ("the day before yesterday", MONDAY, "past", "2023-05-06"),
    ("tomorrow", MONDAY, "future", "2023-05-09"),
    ("two days ago", MONDAY, "past", "2023-05-06"),
    ("3 days ago", SATURDAY, "past", "2024-02-28"),
    ("a few days ago", MONDAY, "past", "2023-05-03/2023-05-06"),
    ("last week", MONDAY, "past", "2023-05-01/2023-05-07"),
    ("next week", MONDAY, "future", "2023-05-15/2023-05-21"),
    ("three weeks ago", MONDAY, "past", "2023-04-17/2023-04-23"),
    ("next month", MONDAY, "future", "2023-06-01/2023-06-30"),
    ("last month", SATURDAY, "past", "2024-02-01/2024-02-29"),
    ("last Saturday", MONDAY, "past", "2023-05-06"),
    ("next Friday", MONDAY, "future", "2023-05-12"),
    ("in June", MONDAY, "past", "2022-06-01/2022-06-30"),
    ("in June", MONDAY, "future", "2023-06-01/2023-06-30"),
    ("this weekend", MONDAY, "past", "2023-05-06/2023-05-07"),
    ("this weekend", THURSDAY, "future", "2023-08-19/2023-08-20"),
    ("this weekend", SATURDAY, "past", "2024-03-02/2024-03-03"),
    ("last weekend", THURSDAY, "past", "2023-08-12/2023-08-13"),
    ("next weekend", SATURDAY, "future", "2024-03-09/2024-03-10"),
    ("two weekends ago", MONDAY, "past", "2023-04-29/2023-04-30"),
    ("a year ago", MONDAY, "past", "2022-01-01/2022-12-31"),
    ("last year", SATURDAY, "past", "2023-01-01/2023-12-31"),
    ("last summer", MONDAY, "past", "2022-06-01/2022-08-31"),
    ("next summer", THURSDAY, "future", "2024-06-01/2024-08-31"),
    ("the week before", MONDAY, "past", "2023-05-01/2023-05-07"),
    ("last night", MONDAY, "past", "2023-05-07"),
    ("the 20th of October", SATURDAY, "future", "2024-10-20"),
    ("May 2023", MONDAY, "past", "2023-05-01/2023-05-31"),
    ("in 2022", MONDAY, "past", "2022-01-01/2022-12-31"),
    ("on 2/8", MONDAY, "past", "2023-02-08"),  # month first, the last such day before the session
    ("on 12/25", MONDAY, "past", "2022-12-25"),
    ("since 3/1/2024", MONDAY, "past", "2024-03-01"),
    ("4/3/23", SATURDAY, "past", "2023-04-03"),  # two digits: the century nearest the session's year
    ("2/29/24", MONDAY, "past", "2024-02-29"),
]


@pytest.mark.parametrize("expression,base,prefer,expected", CASES)
def test_relative_expression_resolves_to_iso(expression, base, prefer, expected):
    resolved = resolve(expression, base, prefer=prefer)
    assert resolved is not None and resolved.iso == expected
    assert resolved.text == expression  # the original words are kept


def test_a_numeric_date_is_found_only_where_it_can_be_one():
    from seem_dagster.episodic.extraction.timex import RELATIVE_PATTERN

    found = lambda text: [m.group(0) for m in RELATIVE_PATTERN.finditer(text)]  # noqa: E731
    assert found("I took my niece to the museum on 2/8 and she loved it") == ["on 2/8"]
    assert found("We met 12/25/2022 at noon") == ["12/25/2022"]
    assert found("Add 1/2 cup of sugar and 3/4 of the flour") == []  # a fraction, no preposition, no year
    assert found("on 13/45") == [] and resolve("2/29/23", MONDAY) is None  # no such month, no such day


@pytest.mark.parametrize("duration", ["seven months", "three weeks", "a while", "recently", "an hour"])
def test_durations_and_vague_words_are_not_dates(duration):
    assert resolve(duration, MONDAY) is None
