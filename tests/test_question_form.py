"""Whether a question asks for several things: the rule by hand, then on the real tagger."""

from datetime import datetime

import pytest

from seem_dagster.config import RetrievalConfig
from seem_dagster.retrieval.query import form_of, read_question
from seem_dagster.retrieval.question_form import asks_advice, asks_for_several, may_ask_for_several
from seem_dagster.retrieval.question_tags import question_tags


def test_the_rule_on_hand_tagged_questions():
    assert asks_for_several([("What", "WDT"), ("activities", "NNS"), ("does", "VBZ"), ("Mel", "NNP"), ("do", "VB")])
    assert asks_for_several([("which", "WDT"), ("Star", "NNP"), ("Wars", "NNPS"), ("sites", "NNS")])  # NNPS counts
    assert asks_for_several([("How", "WRB"), ("many", "JJ"), ("times", "NNS")])
    assert asks_for_several([("how", "WRB"), ("many", "JJ")])  # "how many" alone is enough
    # The plural noun must come within three words of the wh-word.
    assert not asks_for_several([("What", "WP"), ("are", "VBP"), ("Jo", "NNP"), ("'s", "POS"), ("hobbies", "NNS")])
    assert not asks_for_several([("What", "WP"), ("did", "VBD"), ("Caroline", "NNP"), ("research", "NN")])
    assert not asks_for_several([("When", "WRB"), ("did", "VBD"), ("they", "PRP"), ("go", "VB"), ("camping", "NN")])
    assert not asks_for_several([("Which", "WDT"), ("song", "NN"), ("motivates", "VBZ"), ("her", "PRP")])
    assert not asks_for_several([("How", "WRB"), ("much", "JJ"), ("money", "NN")])
    assert not asks_for_several([])


def test_only_questions_that_could_ask_for_several_are_tagged():
    assert may_ask_for_several("What activities does Mel do?") and may_ask_for_several('"which ones?"')
    assert may_ask_for_several("How many children does she have?") and not may_ask_for_several("How did it go?")
    assert may_ask_for_several("What do the children like?")  # an irregular plural within reach
    # No word after what/which could be a plural noun: no tagger (a one-shot query never loads spaCy for it).
    assert not may_ask_for_several("What did Caroline research?") and not may_ask_for_several("Which book did she read?")
    assert not may_ask_for_several("When did Mel go camping?") and not may_ask_for_several("Did she?")
    assert not may_ask_for_several("") and not may_ask_for_several("?!")


@pytest.mark.parametrize(("question", "several"), [
    ("What activities does Melanie partake in?", True),
    ("Which cities has Jon visited?", True),
    ("What kinds of books does she read?", True),
    ("How many times has she gone camping?", True),
    ("What did Caroline research?", False),
    ("Which song motivates Caroline to be courageous?", False),
    ("Where did Caroline move from 4 years ago?", False),
])
def test_the_real_tagger_reads_the_form(question, several):
    assert asks_for_several(question_tags(question)) is several
    assert form_of(question, RetrievalConfig()) is several
    assert form_of(question, RetrievalConfig(list_breadth=False)) is False  # not read when nothing uses it
    assert form_of(question, RetrievalConfig(use_rpe=False)) is False


@pytest.mark.parametrize("question, latest", [
    ("Which streaming service did I start using most recently?", True),
    ("What is my current record in the league?", True),
    ("Do I still go to the gym on Mondays?", True),
    ("Can you suggest some accessories that would complement my current photography setup?", False),
    ("I'm trying to decide whether to buy a NAS device now or wait. What do you think?", False),
    ("What did I buy for the kitchen?", False),
])
def test_a_request_for_advice_does_not_ask_for_the_latest(question, latest):
    assert read_question(question, datetime(2024, 5, 1))[1:] == (latest, asks_advice(question))


def test_a_request_for_advice_reads_no_time():
    asked = datetime(2024, 5, 1)
    assert read_question("What did I buy last week?", asked)[0] is not None
    assert read_question("Can you suggest a recipe like the one I cooked last week?", asked) == (None, False, True)
