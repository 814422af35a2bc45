"""The ablation's comparisons and their paired bootstrap intervals, by hand."""

import pytest

from seem_dagster.evaluation.ablation import (
    by_group,
    comparisons,
    differences,
    locomo_columns,
    longmemeval_columns,
    paired_difference,
)
from seem_dagster.evaluation.report import _ablation
from seem_dagster.evaluation.scoring import LocomoQuestion


def test_a_part_that_changes_nothing_has_a_zero_interval_and_a_constant_gain_an_exact_one():
    same = paired_difference([0.5, 1.0, 0.0], [0.5, 1.0, 0.0])
    assert (same.difference, same.low, same.high, same.better, same.worse) == (0.0, 0.0, 0.0, 0, 0)
    assert not same.outside_noise
    gain = paired_difference([1.0, 1.0, 0.5], [0.0, 0.0, -0.5])  # every question +1
    assert (gain.difference, gain.low, gain.high, gain.better, gain.questions) == (1.0, 1.0, 1.0, 3, 3)
    assert gain.outside_noise


def test_the_interval_of_two_questions_is_the_bootstrap_distribution_by_hand():
    # Differences 0 and 1: a resample's mean is 0 (1/4), 0.5 (1/2) or 1 (1/4), so the middle 95%
    # runs from 0 to 1 and holds 0: one question of two is noise.
    d = paired_difference([1.0, 0.0], [0.0, 0.0])
    assert (d.difference, d.low, d.high, d.better, d.worse) == (0.5, 0.0, 1.0, 1, 0)
    assert not d.outside_noise
    # The seed is fixed: the same scores print the same interval.
    scores = [float(i % 3 == 0) for i in range(40)], [float(i % 4 == 0) for i in range(40)]
    assert paired_difference(*scores) == paired_difference(*scores)


def test_paired_scores_must_pair():
    with pytest.raises(ValueError, match="3 with the part, 2 without"):
        paired_difference([1.0, 0.0, 1.0], [1.0, 0.0])
    with pytest.raises(ValueError, match="level"):
        paired_difference([1.0], [0.0], level=1.5)
    assert paired_difference([], []) is None


def test_each_step_is_compared_with_the_step_before_it_and_a_part_taken_away_with_the_method_that_has_it():
    found = comparisons(["seem", "prior", "seem-no-rpe", "seem-named", "seem-named-facts", "prior-named", "dense"])
    assert found == [
        ("+ reading the question, + facts and sentences as keys, + graph walk", "seem-no-rpe", "prior"),  # prior+reading, prior+facts not run
        ("+ RPE (session), + fusion (RPE over episodes)", "seem", "seem-no-rpe"),
        ("the structure: + reading the question, + facts and sentences as keys, + graph walk, + RPE (session), + fusion (RPE over episodes)",
         "seem", "prior"),
        ("seem matching the question as asked only (not also without the speakers' names)", "seem", "seem-named"),
        ("seem matching the facts against the question as asked only", "seem", "seem-named-facts"),
        ("the prior matching the question as asked only", "prior", "prior-named"),
    ]
    assert comparisons(["prior", "prior+facts"]) == [("+ reading the question, + facts and sentences as keys", "prior+facts", "prior")]
    assert comparisons(["prior", "prior+reading", "prior+facts"])[1] == ("+ facts and sentences as keys", "prior+facts", "prior+reading")
    assert comparisons(["seem", "dense"]) == []


def test_columns_hold_each_question_under_its_category_only():
    qs = [LocomoQuestion("1 multi-hop", {"recall@5": 0.0, "recall@10": 0.5, "recall@25": 1.0}),
          LocomoQuestion("4 single-hop", {"recall@5": 1.0, "recall@10": 1.0, "recall@25": 1.0})]
    assert locomo_columns(qs) == {"recall@5 all": [0.0, 1.0], "recall@10 all": [0.5, 1.0], "recall@25 all": [1.0, 1.0],
                                  "recall@10 1 multi-hop": [0.5, None], "recall@10 4 single-hop": [None, 1.0]}
    lme = {"session": [("temporal-reasoning", {"recall_all@5": 1.0})],
           "turn": [("temporal-reasoning", {"recall_all@5": 0.0, "recall_all@10": 1.0})]}
    assert longmemeval_columns(lme) == {"session recall_all@5": [1.0], "turn recall_all@5": [0.0], "turn recall_all@10": [1.0],
                                        "turn recall_all@10 temporal-reasoning": [1.0]}


def test_differences_pair_the_same_questions_and_the_report_prints_them_in_the_ablation_columns():
    def q(cat, r10):
        return LocomoQuestion(cat, {"recall@10": r10})

    cats = ["1 multi-hop", "1 multi-hop", "4 single-hop", "4 single-hop"]
    rows = {"prior": [q(c, r) for c, r in zip(cats, [0.0, 0.0, 1.0, 1.0])],
            "seem": [q(c, r) for c, r in zip(cats, [1.0, 1.0, 1.0, 0.0])]}
    found = differences({m: locomo_columns(r) for m, r in rows.items()}, ["a", "a", "b", "b"])
    (row,) = found["rows"]
    assert (row["with"], row["without"]) == ("seem", "prior")
    mh, single, overall = (row["columns"][c] for c in ("recall@10 1 multi-hop", "recall@10 4 single-hop", "recall@10 all"))
    assert (mh["difference"], mh["low"], mh["high"], mh["questions"], mh["outside_noise"]) == (1.0, 1.0, 1.0, 2, True)
    assert (single["difference"], single["low"], single["high"], single["worse"]) == (-0.5, -1.0, 0.0, 1)
    assert (overall["difference"], overall["better"], overall["worse"], overall["questions"]) == (0.25, 2, 1, 4)
    # Conversation a gains both its questions (+2), b loses one (-1); multi-hop is asked in a only.
    assert (overall["groups_better"], overall["groups_worse"], overall["groups"]) == (1, 1, 2)
    assert (mh["groups_better"], mh["groups_worse"], mh["groups"]) == (1, 0, 1)

    def figures(r):
        return {"recall@10": {"overall": sum(x.scores["recall@10"] for x in r) / 4,
                              "by_category": {c: sum(x.scores["recall@10"] for x in r if x.category == c) / 2 for c in cats[::2]}}}

    lines = _ablation({"benchmark": "locomo", "methods": {m: figures(r) for m, r in rows.items()}, "differences": found})
    (printed,) = [line for line in lines if "| seem - prior |" in line]
    # Nothing was run between them: the row names every part between the prior and seem.
    assert printed.startswith("| + reading the question, + facts and sentences as keys, + graph walk, + RPE (session), + fusion (RPE over episodes) "
                              "| seem - prior | +0.250 [")
    assert printed.endswith("| +1.000 [+1.000, +1.000]* | -0.500 [-1.000, +0.000] | 2 / 1 (conversations 1 / 1 of 2) |")


def test_a_change_is_counted_per_conversation_by_its_mean():
    # a: +1 and -1 cancel (neither), b: +0.5, c: -0.25.
    assert by_group([1.0, 0.0, 0.5, 0.0], [0.0, 1.0, 0.0, 0.25], ["a", "a", "b", "c"]) == (1, 1)
