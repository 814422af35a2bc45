"""Settings chosen on the other conversations and scored on the held-out one, by hand."""

import copy
import json
from pathlib import Path

import pytest

from seem_dagster import Memory
from seem_dagster.cli import main
from seem_dagster.config import RetrievalConfig
from seem_dagster.evaluation.sample import write_sample_as_locomo
from seem_dagster.evaluation.tuning import ascend, memoised, nested, pooled

# Each conversation's score for settings (a, b); a is 0, 1 or 2 and b 0 or 1, both 0 by default.
TABLE = {
    "x": {(0, 0): 0.5, (1, 0): 0.7, (2, 0): 0.6, (0, 1): 0.5, (1, 1): 0.8, (2, 1): 0.6},
    "y": {(0, 0): 0.5, (1, 0): 0.6, (2, 0): 0.9, (0, 1): 0.4, (1, 1): 0.6, (2, 1): 0.9},
    "z": {(0, 0): 0.5, (1, 0): 0.2, (2, 0): 0.3, (0, 1): 0.5, (1, 1): 0.2, (2, 1): 0.3},
}
QUESTIONS = ["x", "x", "y", "z"]  # x has two questions
DEFAULTS = {"a": 0, "b": 0}
GRID = {"a": [0, 1, 2], "b": [0, 1]}


def scores(changes):
    key = (changes.get("a", 0), changes.get("b", 0))
    return [(c, TABLE[c][key]) for c in QUESTIONS]


def test_coordinate_ascent_moves_a_setting_only_for_a_strictly_better_score_and_goes_on_from_there():
    # On y and z: a=2 scores 0.6 against 0.5; then b=1 ties (0.6), so b keeps its default.
    assert ascend(scores, GRID, DEFAULTS, lambda c: c != "x") == {"a": 2}
    # On x (two questions) and z: a=1 (0.533) then, with it, b=1 (0.6); a second pass moves nothing.
    assert ascend(scores, GRID, DEFAULTS, lambda c: c != "y") == {"a": 1, "b": 1}
    # A setting the grid names without a default is refused, not guessed.
    with pytest.raises(ValueError, match="no default for setting"):
        ascend(scores, {"c": [1]}, DEFAULTS, lambda c: True)


def test_each_conversation_is_scored_with_settings_chosen_without_it():
    folds = nested(scores, GRID, DEFAULTS)
    assert [(f.held_out, f.chosen, f.questions) for f in folds] == [("x", {"a": 2}, 2), ("y", {"a": 1, "b": 1}, 1), ("z", {"a": 2}, 1)]
    assert [(f.default, f.tuned) for f in folds] == [(0.5, 0.6), (0.5, 0.6), (0.5, 0.3)]
    # The held-out questions pooled, x's two counting twice: tuning is worth (0.6*2 + 0.6 + 0.3)/4 - 0.5.
    default, tuned = pooled(folds)
    assert default == pytest.approx(0.5) and tuned == pytest.approx(0.525)
    # With one conversation there is nothing to choose on: refused, not scored on its own questions.
    with pytest.raises(ValueError, match="two or more; these are of 1"):
        nested(lambda changes: [("x", 0.5)], GRID, DEFAULTS)


def test_each_distinct_setting_is_evaluated_once_whatever_the_folds_ask():
    calls = []
    cached = memoised(lambda changes: calls.append(dict(changes)) or scores(changes))
    nested(cached, GRID, DEFAULTS)
    keys = [tuple(sorted(c.items())) for c in calls]
    assert len(keys) == len(set(keys)) == len(cached.evaluated)
    assert {} in calls and {"a": 1, "b": 1} in calls


def _tuning_benchmark():
    """benchmarks/tune_retrieval.py as a module (the benchmarks are scripts, not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("tune_retrieval", Path(__file__).parents[1] / "benchmarks" / "tune_retrieval.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_the_tuning_benchmark_scores_the_memory_as_seem_eval_does(tmp_path):
    path = write_sample_as_locomo(tmp_path / "two.json")
    data = json.loads(path.read_text())
    data.append({**copy.deepcopy(data[0]), "sample_id": f"{data[0]['sample_id']}-again"})
    path.write_text(json.dumps(data))
    out = tmp_path / "out"
    assert main(["eval", "locomo", "--data", str(path), "--out", str(out), "--quiet", "--methods", "prior,seem,seem-no-time"]) == 0
    results = json.loads((out / "results.json").read_text())
    lines = []
    tuned = _tuning_benchmark().tune(str(out / "store"), "locomo", say=lines.append)
    assert (tuned["conversations"], tuned["questions"]) == (2, 24)
    for method in ("prior", "seem"):
        figures = tuned["methods"][method]
        # The held-out questions with the defaults are the evaluation's own figure...
        assert figures["default"] == pytest.approx(results["methods"][method]["recall@10"]["overall"], abs=5e-5)
        # ...and each copy's settings were chosen on the other, identical copy: they cannot do worse.
        assert figures["tuned"] >= figures["default"]
        assert [f.held_out for f in figures["folds"]] == [data[0]["sample_id"], f"{data[0]['sample_id']}-again"]
    assert lines[-1].startswith("seem - prior on held-out questions: both at the defaults ")
    # One category alone: the sample's three multi-hop questions in each copy, scored as the evaluation does.
    multi = _tuning_benchmark().tune(str(out / "store"), "locomo", category="multi-hop", say=lambda line: None)
    assert multi["questions"] == 6
    assert multi["methods"]["seem"]["default"] == pytest.approx(results["methods"]["seem"]["recall@10"]["by_category"]["1 multi-hop"],
                                                                abs=5e-5)

    # Tuned from a part switched off: the start is the evaluation's row without it, and the defaults'
    # figure is printed beside it.
    bench = _tuning_benchmark()
    lines = []
    start = bench.start_point("time_weight=0,time_fact_weight=0.0", Memory.open(str(out / "store")).config.retrieval)
    timed = bench.tune(str(out / "store"), "locomo", groups=("time_weight", "time_fact_weight"), start=start, say=lines.append)
    assert timed["methods"]["seem"]["default"] == pytest.approx(results["methods"]["seem-no-time"]["recall@10"]["overall"], abs=5e-5)
    assert timed["methods"]["seem"]["configured"] == pytest.approx(results["methods"]["seem"]["recall@10"]["overall"], abs=5e-5)
    assert timed["methods"]["seem"]["tuned"] >= timed["methods"]["seem"]["default"]
    assert any(line.startswith("seem at the configured defaults") for line in lines)


def test_the_tuning_benchmark_reads_its_start_and_its_groups():
    bench = _tuning_benchmark()
    base = RetrievalConfig()
    assert bench.start_point("", base) == {}
    assert bench.start_point("before", base) == bench.BEFORE
    assert bench.start_point("latest_first=false,time_weight=0,top_facts=3", base) == {
        "latest_first": False, "time_weight": 0.0, "top_facts": 3}
    for bad in ("time_weight", "no_such_setting=1", "damping=2"):  # no value; not a setting; out of its range
        with pytest.raises((SystemExit, ValueError)):
            bench.start_point(bad, base)
    # Every start "before" names lies on the grids, so a part can be tuned back in from it.
    assert all(value in bench.grids()["seem"][name] for name, value in bench.BEFORE.items())
    # A group stands for its grid, a setting's name for that setting alone; the prior tunes only its own.
    assert bench.grids(("sentence_weight",)) == {"prior": {}, "seem": {"sentence_weight": bench.STRUCTURE_GRID["sentence_weight"]}}
    assert bench.grids(("prior", "time_weight"))["prior"] == bench.PRIOR_GRID
    assert set(bench.grids(("reading",))["seem"]) == set(bench.READING_GRID)
    with pytest.raises(SystemExit):
        bench.grids(("no_such_group",))
    # Each grid holds its setting's default, so tuning from the defaults can keep them.
    defaults = RetrievalConfig()
    assert all(getattr(defaults, name) in values for name, values in bench.grids()["seem"].items())
