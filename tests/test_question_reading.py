"""Reading the question on a hand-made memory built through the real pipeline: the days it names move
the turns of those days up, a question about two events gets both events' turns into its top k, and
a question about what holds now puts the latest statement first."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow  # builds through Dagster

CID = "u"
TURNS = [
    ("2023-01-05", "I finally set up the smart thermostat in the living room today."),
    ("2023-01-05", "The smart thermostat app lets me schedule the heating for each room."),
    ("2023-01-12", "I adjusted the smart thermostat schedule so the heating starts at six."),
    ("2023-01-20", "My smart thermostat says we saved ten percent on heating this week."),
    ("2023-02-02", "The smart thermostat now learns when we leave the house."),
    ("2023-02-15", "Got the new wifi extenders working so the garden office finally has internet."),
    ("2023-02-20", "I bought a new blender for smoothies."),
    ("2023-03-01", "I started using Netflix for the documentaries."),
    ("2023-03-10", "I bought a pair of running shoes at the outlet."),
    ("2023-04-02", "I started using Hulu because of the comedy shows."),
    ("2023-04-25", "I bought a cast iron pan for the kitchen."),
    ("2023-05-14", "I started using Disney+ for the kids' movies."),
    ("2023-05-30", "I bought a book about birds at the museum shop."),
    ("2023-01-08", "I live in Leeds, close to the station."),
    ("2023-04-18", "I moved to York last week."),
]
ON = {"split_events": True}  # the defaults, and one ranking per event (off by default: it does not pay on the dev files)
OFF = {"time_weight": 0.0, "time_fact_weight": 0.0, "split_events": False, "latest_first": False, "advice_lexical": 1.0}


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    from seem_dagster import Memory

    path = tmp_path_factory.mktemp("reading") / "store"
    with Memory.open(path) as memory:
        memory.add(CID, [{"speaker": "user", "text": text, "timestamp": f"{day}T{10 + n % 8}:00:00", "id": f"t{n}"}
                         for n, (day, text) in enumerate(TURNS)])
    return path


def top(store, question: str, date: str, k: int, settings: dict) -> list[str]:
    from seem_dagster import Memory

    with Memory.open(store, retrieval=settings) as memory:
        return [h.source_ref for h in memory.search(CID, question, k=k, date=date)]


def test_a_question_about_two_events_gets_both_into_its_top_k(store):
    question = "Which device did I set up first, the smart thermostat or the mesh network system?"
    one = top(store, question, "2023-06-10", 3, OFF)
    both = top(store, question, "2023-06-10", 3, ON)
    assert "t5" not in one and {"t0", "t5"} <= set(both), (one, both)


def test_a_most_recently_question_ranks_the_latest_statement_first(store):
    question = "Which streaming service did I start using most recently?"
    assert top(store, question, "2023-06-10", 3, OFF)[0] != "t11"
    assert top(store, question, "2023-06-10", 3, ON)[0] == "t11"


def test_where_someone_lives_now_is_the_value_that_holds(store):
    ranked = top(store, "Where do I live now?", "2023-06-10", 2, ON)
    assert ranked[0] == "t14", ranked  # York: it superseded Leeds


def test_the_days_the_question_names_move_their_turns_up(store):
    assert top(store, "What did I buy 10 days ago?", "2023-06-09", 1, OFF) != ["t12"]
    assert top(store, "What did I buy 10 days ago?", "2023-06-09", 1, ON) == ["t12"]  # the book, bought on 30 May
    assert top(store, "What did I buy in February?", "2023-06-09", 1, ON) == ["t6"]  # the blender


def test_a_month_named_without_its_year_counts_whole_not_as_a_time_counted_from_the_question_date(store):
    april = {"t9", "t10", "t14"}  # the turns of April 2023
    whole = top(store, "What did I start using in April?", "2023-06-09", 2, ON)
    counted = top(store, "What did I start using in April?", "2023-06-09", 2, {**ON, "time_calendar": 0.25})
    assert set(whole) <= april and not set(counted) <= april, (whole, counted)


def test_a_request_for_advice_is_not_read_as_asking_for_the_latest(store):
    # "current" or "now" in a request sets its scene: the streaming turns it matches keep the walk's
    # order, where the same words in a question about what holds put the latest first.
    for question in ("Can you recommend some documentaries on my current streaming service?",
                     "Any tips for the streaming service I currently use?"):
        assert top(store, question, "2023-06-10", 3, ON) == top(store, question, "2023-06-10", 3, {**ON, "latest_first": False})
    asked = "Which streaming service do I currently use?"
    assert top(store, asked, "2023-06-10", 3, {**ON, "latest_first": False})[0] != "t11"
    assert top(store, asked, "2023-06-10", 3, ON)[0] == "t11"
