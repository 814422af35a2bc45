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
    # Weeks, weekends, months and weekdays counted back; other ways of saying a count.
    ("the week before last", MONDAY, "past", "2023-04-24/2023-04-30"),
    ("the weekend before last", THURSDAY, "past", "2023-08-05/2023-08-06"),
    ("this past weekend", MONDAY, "past", "2023-05-06/2023-05-07"),
    ("the previous month", SATURDAY, "past", "2024-02-01/2024-02-29"),
    ("two Saturdays ago", MONDAY, "past", "2023-04-29"),
    ("three days back", MONDAY, "past", "2023-05-05"),
    ("a couple weeks ago", MONDAY, "past", "2023-04-24/2023-04-30"),
    ("a couple weekends ago", MONDAY, "past", "2023-04-29/2023-04-30"),
    ("seven Saturdays ago", MONDAY, "past", "2023-03-25"),
    # Parts of a month or year, holidays, seasons.
    ("mid-March", MONDAY, "past", "2023-03-11/2023-03-21"),
    ("early June", MONDAY, "future", "2023-06-01/2023-06-11"),
    ("late April", SATURDAY, "past", "2023-04-20/2023-04-30"),
    ("mid-Jun", MONDAY, "future", "2023-06-11/2023-06-21"),  # an abbreviation: its own month
    ("late Sept", MONDAY, "past", "2022-09-20/2022-09-30"),
    ("late May", MONDAY, "past", "2022-05-21/2022-05-31"),  # this year's is not begun: last year's
    ("mid-March", datetime(2023, 3, 5), "past", "2022-03-11/2022-03-21"),
    ("early May", datetime(2023, 5, 20), "future", "2024-05-01/2024-05-11"),  # this year's is over
    ("the beginning of this month", THURSDAY, "past", "2023-08-01/2023-08-11"),
    ("the end of the month", MONDAY, "past", "2023-04-20/2023-04-30"),  # said on the 8th: last month's
    ("at the end of the month", MONDAY, "future", "2023-05-21/2023-05-31"),
    ("the end of the year", MONDAY, "past", "2022-11-01/2022-12-31"),  # not begun yet: last year's
    ("the end of the year", MONDAY, "future", "2023-11-01/2023-12-31"),
    ("Christmas", MONDAY, "past", "2022-12-25"),
    ("on Valentine’s Day", MONDAY, "past", "2023-02-14"),  # the curly apostrophe
    ("Christmas", MONDAY, "future", "2023-12-25"),
    ("for Thanksgiving", THURSDAY, "past", "2022-11-24"),
    ("the holidays", SATURDAY, "past", "2023-12-20/2024-01-02"),
    ("summer 2021", MONDAY, "past", "2021-06-01/2021-08-31"),
    ("in the summer", MONDAY, "past", "2022-06-01/2022-08-31"),
    ("in the summer", MONDAY, "future", "2023-06-01/2023-08-31"),  # a plan: the coming one
    ("in winter", datetime(2024, 1, 3), "future", "2023-12-01/2024-02-29"),  # the one under way
    ("in the spring of 2020", MONDAY, "past", "2020-03-01/2020-05-31"),
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


def test_the_other_ways_of_saying_a_time_are_found_where_they_are_times():
    from seem_dagster.episodic.extraction.timex import RELATIVE_PATTERN

    found = lambda text: [m.group(0) for m in RELATIVE_PATTERN.finditer(text)]  # noqa: E731
    assert found("We hiked Mount Tam the week before last, and again over the holidays") == ["the week before last",
                                                                                            "over the holidays"]
    assert found("I bought a kayak in mid-March and sold it in summer 2021, for Thanksgiving") == [
        "mid-March", "in summer 2021", "for Thanksgiving"]
    assert found("I live on the 15th floor; my plans for the summer; the colours of autumn") == []
    assert found("Waking up early may help. I hurt my knee in the fall. Two weeks back home, four weekends back to back") == []
    assert found("I moved in late May, three days back.") == ["late May", "three days back"]


def test_a_part_of_a_period_already_over_is_no_guess_for_what_is_to_come():
    """"I've been going since the beginning of the month" reads as future to the tense rule ("going"):
    the month's beginning is over, and next month's would be wrong, so it stays undated."""
    assert resolve("the beginning of the month", datetime(2023, 5, 20), prefer="future") is None
    assert resolve("the beginning of the month", datetime(2023, 5, 20), prefer="past").iso == "2023-05-01/2023-05-11"


def test_a_place_is_not_read_as_a_time():
    """"in the back of the bus" is where, not when (the location rule asks ANCHOR)."""
    from seem_dagster.episodic.extraction.timex import ANCHOR

    assert not ANCHOR.search("the back of the bus") and resolve("the back of the bus", MONDAY) is None


@pytest.mark.parametrize("duration", ["seven months", "three weeks", "a while", "recently", "an hour"])
def test_durations_and_vague_words_are_not_dates(duration):
    assert resolve(duration, MONDAY) is None
