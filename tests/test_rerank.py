"""The learned reranking (retrieval/rerank.py): the fit, the features and the bundled model, by hand."""

import json
import math

import numpy as np
import polars as pl
import pytest
from test_graph_retrieval import DIM, index, unit

from seem_dagster import methods as registry
from seem_dagster.config import RetrievalConfig, resolve_standard
from seem_dagster.evaluation.ablation import comparisons
from seem_dagster.evaluation.methods import method_config, rankers, reads_form
from seem_dagster.retrieval.rerank import FACT_FEATURES, FEATURES, MODEL_PATH, RerankModel, Signals, bundled_model, feature_matrix, fit
from seem_dagster.retrieval.search import rerank_features, retrieve
from seem_dagster.schemas import Passages


def test_the_fit_is_l2_logistic_regression_solved_by_hand():
    # Two points, x = -1 (label 0) and x = 1 (label 1): standardised they stay -1 and 1, the bias is 0 by
    # symmetry and the weight w solves w + 2 * sigmoid(w) - 2 = 0 with an L2 penalty of 1: w = 0.6748.
    x = np.zeros((2, len(FEATURES)))
    x[:, FEATURES.index("prior")] = [-1.0, 1.0]
    model = fit(x, np.array([0.0, 1.0]), ("prior",), l2=1.0)
    (w,) = model.weights
    assert w + 2 / (1 + math.exp(-w)) - 2 == pytest.approx(0.0, abs=1e-9)
    assert w == pytest.approx(0.6748, abs=1e-4) and model.bias == pytest.approx(0.0, abs=1e-9)
    assert (model.low[0], model.high[0], model.mean[0], model.scale[0]) == (-1.0, 1.0, 0.0, 1.0)


def test_a_value_beyond_the_fitted_range_scores_as_the_range_s_end():
    # A 4,000-word pasted document scores as the longest turn the model saw, never beyond it.
    model = RerankModel(("log_words",), np.array([0.0]), np.array([math.log1p(99)]), np.array([0.0]), np.array([1.0]), np.array([1.0]), 0.0)
    x = np.zeros((3, len(FEATURES)))
    x[:, FEATURES.index("log_words")] = [math.log1p(10), math.log1p(99), math.log1p(4000)]
    scores = model.score(x)
    assert scores[0] == pytest.approx(math.log1p(10)) and scores[1] == scores[2] == pytest.approx(math.log1p(99))


def test_the_features_of_hand_made_passages():
    # Three passages: p1 answers p0 (a question turn), p2 is Bo's; the question names Ann.
    # Facts: two of p0's (matches 0.4 and 0.1) and one of p2's (0.5); p1 has none.
    signals = Signals(prior=np.array([2.0, 1.0, 0.5]), fact_key=np.array([0.1, 0.0, 0.2]), fact_scores=np.array([0.4, 0.5, 0.1]))
    fact_rows = np.array([0, 2, 0])
    rows = np.array([2, 1, 0])  # the ranking being reordered: p2 first
    matrix = feature_matrix(rows, signals, np.array([-1, 0, -1]), ["Ann", "Ann", "Bo"], {"Ann"}, np.array([3, 7, 0]), several=True,
                            fact_rows=fact_rows)
    col = {f: matrix[:, i].tolist() for i, f in enumerate(FEATURES)}
    assert col["log_rank"] == pytest.approx([0.0, math.log(2), math.log(3)])
    assert col["prior"] == [0.25, 0.5, 1.0]  # a share of the best passage's
    assert col["fact_key"] == [0.2, 0.0, 0.1] and col["best_fact"] == [0.5, 0.0, 0.4]
    assert col["is_reply"] == [0.0, 1.0, 0.0] and col["asked_prior"] == [0.0, 1.0, 0.0]  # p1 inherits p0's prior share 2/2
    assert col["named_speaker"] == [0.0, 1.0, 1.0] and col["other_speaker"] == [1.0, 0.0, 0.0]
    assert col["several"] == [1.0] * 3 and col["several_x_rank"] == col["log_rank"]
    assert col["log_words"] == pytest.approx([0.0, math.log(8), math.log(4)])
    no_facts = feature_matrix(rows, Signals(prior=signals.prior), np.array([-1, 0, -1]), ["Ann", "Ann", "Bo"], set(), np.array([3, 7, 0]),
                              several=False, fact_rows=fact_rows)
    assert not no_facts[:, [FEATURES.index(f) for f in ("fact_key", "best_fact", "named_speaker", "other_speaker", "several")]].any()


def test_the_bundled_models_read_known_features_and_say_where_they_came_from():
    data = json.loads(MODEL_PATH.read_text())
    assert data["fitted_on"]["command"].startswith("benchmarks/train_rerank.py")
    seem, prior = bundled_model("seem"), bundled_model("prior")
    assert set(seem.features) <= set(FEATURES) and not set(prior.features) & set(FACT_FEATURES)  # the prior's model reads no fact
    assert np.all(seem.low <= seem.high) and np.all(seem.scale > 0)
    with pytest.raises(ValueError, match="no model for the 'walk' ranking"):
        bundled_model("walk")


def test_the_evaluation_reranks_a_conversation_the_model_saw_with_the_fold_that_did_not_and_a_memory_never_does():
    from seem_dagster.evaluation.prepared import Prepared

    data = json.loads(MODEL_PATH.read_text())
    prepared = Prepared.for_methods(["seem+rerank"], reranks=True)
    for base in ("seem", "prior"):
        folds = data["models"][base]["held_out"]
        assert len(folds) == data["fitted_on"]["conversations"]["locomo"]  # one per conversation it was fitted on
        some = sorted(folds)[0]
        assert np.array_equal(prepared.folds[base][some].weights, RerankModel.from_json(folds[some]).weights)
        assert not np.array_equal(prepared.folds[base][some].weights, bundled_model(base).weights)
    seen = index([("Ann", "play", "guitar", "p0")], [unit(1, 0)], 2, [unit(1, 0), unit(0, 1)])
    seen.passages = seen.passages.with_columns(pl.lit(sorted(data["models"]["seem"]["held_out"])[0]).alias(Passages.conversation_id))
    assert set(prepared.rerankers(seen)) == {"seem", "prior"}
    never = index([("Ann", "play", "guitar", "p0")], [unit(1, 0)], 2, [unit(1, 0), unit(0, 1)])
    assert prepared.rerankers(never) == {}  # retrieval then reranks with the bundled model, as a memory does
    # Retrieval takes the model it is handed: the fold's order, not the bundled model's, when they differ.
    off = RetrievalConfig(use_graph=False, use_rpe=False, fact_key_weight=0.0, lexical_weight=0.0, rerank=True, rerank_depth=2)
    fold = RerankModel(("log_rank",), np.array([0.0]), np.array([1.0]), np.array([0.0]), np.array([1.0]), np.array([5.0]), 0.0)
    q = unit(1, 0)
    plain = [r.passage_id for r in retrieve(seen, q, np.zeros((0, DIM), np.float32), off).ranked]
    flipped = [r.passage_id for r in retrieve(seen, q, np.zeros((0, DIM), np.float32), off, rerankers={"prior": fold}).ranked]
    assert flipped == plain[::-1]  # a weight on log_rank above zero puts the lower-ranked first


def test_reranking_reorders_only_the_top_and_keeps_every_passage():
    # Six turns of Ann's; the question matches p0 best. Reranking the top 3 may reorder them only.
    vecs = [unit(1, 0), unit(1, 0.5), unit(1, 1), unit(0, 1), unit(0, 1, 1), unit(0, 0, 1)]
    idx = index([("Ann", "play", "guitar", "p0")], [unit(1, 0)], 6, vecs)
    off = RetrievalConfig(use_graph=False, use_rpe=False, fact_key_weight=0.0, lexical_weight=0.0, rerank=False)
    on = off.replace(rerank=True, rerank_depth=3)
    q = unit(1, 0)
    before = retrieve(idx, q, np.zeros((0, DIM), np.float32), off, question_text="What does Ann play?")
    after = retrieve(idx, q, np.zeros((0, DIM), np.float32), on, question_text="What does Ann play?")
    ids_before, ids_after = [r.passage_id for r in before.ranked], [r.passage_id for r in after.ranked]
    assert sorted(ids_after[:3]) == sorted(ids_before[:3]) and ids_after[3:] == ids_before[3:]
    model = bundled_model("prior")
    expected = np.argsort(-model.score(rerank_features(idx, before.ranked[:3], before.signals, "What does Ann play?", False)), kind="stable")
    assert ids_after[:3] == [ids_before[i] for i in expected]
    assert all("reranked from" in str(r.reason) for at, r in enumerate(after.ranked[:3]) if r.passage_id != ids_before[at])


def test_the_rerank_methods_and_their_comparisons():
    base = resolve_standard().config.retrieval
    configs = {name: method_config(base, name) for name in registry.names()}
    assert configs["seem+rerank"].rerank and configs["prior+rerank"].rerank and not configs["prior+rerank"].use_graph
    assert not any(configs[m].rerank for m in ("prior", "prior+facts", "seem-no-rpe", "seem-no-fusion"))
    assert reads_form(base, "prior+rerank")  # the reranker reads whether the question asks for several things
    assert set(rankers(base, ["seem+rerank", "prior+rerank"])) == {"seem+rerank", "prior+rerank"}
    pairs = {(with_part, without): label for label, with_part, without in comparisons(["seem", "seem+rerank", "prior", "prior+rerank"])}
    assert ("seem+rerank", "seem") in pairs and ("prior+rerank", "prior") in pairs
    assert pairs[("seem+rerank", "prior+rerank")] == "the structure, both reranked by their own models"
