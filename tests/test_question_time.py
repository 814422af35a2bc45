"""The question's time: each kind of expression resolves to its window against the question's date."""

from __future__ import annotations

from datetime import date, datetime, timedelta

import pytest

from seem_dagster.retrieval.question_time import question_window

SAT = datetime(2023, 3, 11, 15, 47)  # a Saturday


@pytest.mark.parametrize("question, asked, first, last", [
    ("What did I buy yesterday?", SAT, date(2023, 3, 10), date(2023, 3, 10)),
    ("What did I do the day before yesterday?", SAT, date(2023, 3, 9), date(2023, 3, 9)),
    ("What kitchen appliance did I buy 10 days ago?", SAT, date(2023, 2, 28), date(2023, 3, 2)),
    ("Who did I go with to the music event last Saturday?", SAT, date(2023, 3, 4), date(2023, 3, 4)),  # today is Saturday
    ("I received a piece of jewelry last Saturday from whom?", datetime(2023, 3, 9), date(2023, 3, 4), date(2023, 3, 4)),
    ("What did I cook last Friday?", SAT, date(2023, 3, 10), date(2023, 3, 10)),
    ("What charity event did I participate in a month ago?", SAT, date(2023, 1, 30), date(2023, 2, 19)),  # 9 Feb, give or take 10 days
    ("What did I do with Rachel on the Wednesday two months ago?", datetime(2023, 4, 1), date(2023, 1, 18), date(2023, 2, 13)),
    ("Which pair of shoes did I clean last month?", datetime(2023, 5, 24), date(2023, 4, 1), date(2023, 4, 30)),
    ("What did I do last week?", SAT, date(2023, 2, 27), date(2023, 3, 5)),
    ("What did we plan last weekend?", SAT, date(2023, 3, 4), date(2023, 3, 5)),
    ("Which sports events did I watch in January?", SAT, date(2023, 1, 1), date(2023, 1, 31)),
    ("What did I do in March?", datetime(2023, 2, 10), date(2022, 3, 1), date(2022, 3, 31)),  # the last March before it
    ("What did I give my partner on Valentine's day?", SAT, date(2023, 2, 14), date(2023, 2, 14)),
    ("What did I give my partner on Valentine's Day?", datetime(2023, 2, 10), date(2022, 2, 14), date(2022, 2, 14)),
    ("Where was I on Thanksgiving?", datetime(2023, 12, 1), date(2023, 11, 23), date(2023, 11, 23)),
    ("What did we eat at Easter?", datetime(2024, 4, 20), date(2024, 3, 31), date(2024, 3, 31)),
    ("What happened on March 5th?", SAT, date(2023, 3, 5), date(2023, 3, 5)),
    ("What happened on the 29th of February?", datetime(2024, 3, 10), date(2024, 2, 29), date(2024, 2, 29)),  # a leap year
    ("How many MCU films did I watch in the last 3 months?", datetime(2023, 6, 17), date(2023, 3, 19), date(2023, 6, 17)),
    ("How many books have I read this year?", SAT, date(2023, 1, 1), date(2023, 3, 11)),
    ("Where did I travel between June and August?", datetime(2023, 10, 1), date(2023, 6, 1), date(2023, 8, 31)),
    ("What did I start in late January?", SAT, date(2023, 1, 21), date(2023, 1, 31)),
    ("Which museum did I visit on 2/8?", SAT, date(2023, 2, 8), date(2023, 2, 8)),
    # Other ways of saying such times.
    ("What did I buy a fortnight ago?", SAT, date(2023, 2, 21), date(2023, 3, 1)),
    ("What did I cook three days back?", SAT, date(2023, 3, 8), date(2023, 3, 8)),
    ("What did I buy a couple weeks ago?", SAT, date(2023, 2, 20), date(2023, 3, 2)),  # 25 Feb, give or take five days
    ("What did I do this past weekend?", SAT, date(2023, 3, 4), date(2023, 3, 5)),  # today's weekend is not over
    ("What did I do over the past weekend?", datetime(2023, 3, 13), date(2023, 3, 11), date(2023, 3, 12)),
    ("Who did I meet this Saturday?", SAT, date(2023, 3, 11), date(2023, 3, 11)),  # a weekday that is today
    ("What did I buy this Monday?", SAT, date(2023, 3, 6), date(2023, 3, 6)),
    ("What did I do two Fridays ago?", SAT, date(2023, 3, 3), date(2023, 3, 3)),
    ("What did I do the Sunday before last?", SAT, date(2023, 2, 26), date(2023, 2, 26)),
    ("What did I do the week before last?", SAT, date(2023, 2, 20), date(2023, 2, 26)),
    ("What did I read the previous month?", SAT, date(2023, 2, 1), date(2023, 2, 28)),
    ("What did I buy in mid-February?", SAT, date(2023, 2, 11), date(2023, 2, 21)),
    ("What did I buy in late March?", SAT, date(2022, 3, 21), date(2022, 3, 31)),  # this March's end is to come
    ("What did I do at the end of last month?", SAT, date(2023, 2, 18), date(2023, 2, 28)),
    ("What did I start at the beginning of the year?", SAT, date(2023, 1, 1), date(2023, 2, 28)),
    ("What did I finish at the end of the year?", SAT, date(2022, 11, 1), date(2022, 12, 31)),  # asked in March: last year's
    ("What did I cook on the 5th?", SAT, date(2023, 3, 5), date(2023, 3, 5)),
    ("What did I do on the 31st?", SAT, date(2023, 1, 31), date(2023, 1, 31)),  # February has none
    ("What did I do on the 29th?", datetime(2024, 3, 10), date(2024, 2, 29), date(2024, 2, 29)),  # a leap year
    ("What did I do on the 29th?", datetime(2023, 3, 10), date(2023, 1, 29), date(2023, 1, 29)),
    ("Where did I travel in the summer?", datetime(2023, 10, 1), date(2023, 6, 1), date(2023, 8, 31)),
    ("Where did I ski this winter?", datetime(2023, 1, 15), date(2022, 12, 1), date(2023, 1, 15)),  # begun, not over
    ("Which state did I visit in summer 2021?", SAT, date(2021, 6, 1), date(2021, 8, 31)),
    ("Where was I last Christmas?", datetime(2023, 12, 1), date(2022, 12, 25), date(2022, 12, 25)),
    ("What did I bake over the holidays?", datetime(2023, 1, 10), date(2022, 12, 20), date(2023, 1, 2)),
    ("How many runs have I done since February?", SAT, date(2023, 2, 1), date(2023, 3, 11)),
    ("What did I plant in the spring of 2020?", SAT, date(2020, 3, 1), date(2020, 5, 31)),
    ("What did I do on the 15th in February?", SAT, date(2023, 2, 1), date(2023, 2, 28)),  # the month said, not the last 15th
    ("What did I buy at the end of the month?", SAT, date(2023, 2, 18), date(2023, 2, 28)),  # this month's end is to come
])
def test_each_expression_kind_resolves_to_its_window(question, asked, first, last):
    window = question_window(question, asked)
    assert window is not None and (window.start, window.end) == (first, last), window


def test_a_time_that_names_the_calendar_is_told_from_one_counted_from_the_question_date():
    for question in ("Which museum did I visit on 2/8/2023?", "Which museum did I visit on 2/8?", "Where did I go in February?",
                     "What happened on March 5th?", "Where was I on Thanksgiving?", "What did I start in late January?",
                     "Where did I travel between June and August?", "What did I do on 16 June, 2023?",
                     "What did I cook on the 5th?", "Where did I travel in the summer?", "Where was I last Christmas?",
                     "How many runs have I done since February?"):
        assert question_window(question, SAT).calendar, question
    for question in ("What did I buy 10 days ago?", "Who did I meet last Saturday?", "What did I do last week?",
                     "How many books have I read this year?", "What did I cook recently?", "What did I buy in the past two months?",
                     "What did I buy a fortnight ago?", "What did I do this past weekend?", "What did I do the week before last?"):
        assert not question_window(question, SAT).calendar, question


def test_a_month_end_and_a_leap_year_resolve_by_the_calendar():
    assert question_window("What did I buy a month ago?", datetime(2024, 3, 31)).start <= date(2024, 3, 1)
    window = question_window("What did I do last month?", datetime(2024, 3, 31))
    assert (window.start, window.end) == (date(2024, 2, 1), date(2024, 2, 29))
    assert question_window("What happened on February 29?", datetime(2023, 5, 1)).start == date(2020, 2, 29)


def test_vaguer_expressions_are_wider_and_less_sure():
    day = question_window("What did I buy 2 days ago?", SAT)
    month = question_window("What did I buy a month ago?", SAT)
    few = question_window("What did I buy a few months ago?", SAT)
    recent = question_window("What did I buy recently?", SAT)
    assert day.sure == 1.0 > month.sure > few.sure > recent.sure
    assert (day.end - day.start).days < (month.end - month.start).days < (few.end - few.start).days
    assert day.tolerance < month.tolerance < few.tolerance
    after = month.end + timedelta(days=5)
    assert month.nearness(month.start, month.start) == 1.0 and 0 < month.nearness(after, after) < 1
    assert month.nearness(month.end + timedelta(days=60), month.end + timedelta(days=60)) == 0


@pytest.mark.parametrize("question", [
    "Which device did I set up first, the smart thermostat or the mesh network system?",
    "What time do I wake up on Tuesdays and Thursdays?",
    "How many days passed between the day I replaced my spark plugs and the day I washed the car?",
    "May I ask what my favourite marketing book is?",
    "What is my current record in the recreational volleyball league?",
    "Which restaurant is on the 15th floor?",  # an ordinal that is not a day
    "What aspect of autumn does Andrew find beautiful?",  # a season that is not a time
    "What are Caroline's plans for the summer?",  # a plan: no past season to look in
    "What did I do on the 0th?",  # no such day
    "What did I pack for my two weeks back home",  # "back" that is not "ago"
])
def test_no_window_when_no_time_is_said(question):
    assert question_window(question, SAT) is None
