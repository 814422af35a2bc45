"""BM25 with and without stems: the real bm25s and the real Snowball stemmer, scores computed by hand."""

import math

import numpy as np
import polars as pl
import pytest

from seem_dagster import methods as registry
from seem_dagster.config import RetrievalConfig
from seem_dagster.evaluation.methods import ids, method_config, rankers
from seem_dagster.graph.build import graph_edges
from seem_dagster.graph.entities import entities_from_facts
from seem_dagster.retrieval.index import FACT, PASSAGE, MemoryIndex
from seem_dagster.retrieval.lexical import Bm25
from seem_dagster.retrieval.query import EncodedQuery
from seem_dagster.retrieval.search import retrieve
from seem_dagster.schemas import Episodes, Facts, Passages, embeddings_frame, table
from tests.test_graph_retrieval import T


def test_a_word_matches_its_stem_and_the_score_is_bm25s():
    # Tokens after stop words and one-letter words: doc 0 ["camping", "camped"], doc 1 ["painting"].
    texts = ["a: camping camped", "b: painting"]
    stemmed, exact = Bm25(texts), Bm25(texts, stems=False)
    # Stemmed, doc 0 holds "camp" twice: idf ln(1 + (2 - 1 + 0.5) / (1 + 0.5)) = ln 2; length 2 of a mean
    # 1.5, so tf part 2 / (2 + 1.5 x (0.25 + 0.75 x 2 / 1.5)) = 2 / 3.875.
    assert stemmed.scores("camps") == pytest.approx([math.log(2) * 2 / 3.875, 0.0], rel=1e-5)
    assert exact.scores("camps").tolist() == [0.0, 0.0]  # no exact word in common
    assert exact.scores("camping")[0] > 0 and exact.scores("camping")[1] == 0
    assert stemmed.scores("the").tolist() == [0.0, 0.0]  # a stop word alone matches nothing
    assert Bm25([]).scores("camps").shape == (0,)


def _index(texts, vectors):
    p = table(Passages, [
        {"passage_id": f"p{i}", "conversation_id": "c", "session_id": "s", "session_index": 0, "turn_index": i,
         "speaker": "Ann", "text": t, "timestamp": T, "source_ref": f"D1:{i}"}
        for i, t in enumerate(texts)
    ])
    f = table(Facts, [])
    e = table(Episodes, [
        {"episode_id": f"e{i}", "conversation_id": "c", "summary": "", "events": [], "passage_ids": [f"p{i}"],
         "frame_ids": [f"p{i}"], "first_time": T, "last_time": T}
        for i in range(len(texts))
    ])
    v = pl.concat([embeddings_frame(PASSAGE, p["passage_id"].to_list(), np.stack(vectors), "hand", 2),
                   embeddings_frame(FACT, [], np.zeros((0, 2), np.float32), "hand", 2)])
    return MemoryIndex.from_tables(p, f, entities_from_facts(f), e, graph_edges(f, []), v)


def test_the_prior_and_the_baselines_follow_lexical_stems_and_the_unstemmed_ablations_do_not_stem():
    # The dense vectors favour p0 a little; only p1 shares a stem with the question ("camped" ~ "camping").
    idx = _index(["we had a quiet weekend", "we went camping at the beach"], [np.array([1.0, 0.0]), np.array([0.9, 0.436])])
    question, vector = "Where has she camped?", np.array([1.0, 0.0], np.float32)
    cfg = RetrievalConfig(use_graph=False, use_rpe=False, fact_key_weight=0.0, answer_share=0.0, lexical_weight=0.5)

    def order(c):
        return [r.passage_id for r in retrieve(idx, vector, np.zeros((0, 2), np.float32), c, question_text=question).ranked]

    # Stemmed: p1 0.9 + 0.5 x 1 (the best BM25 score) = 1.4 against p0's 1.0. Exact words: BM25 is 0 for both.
    assert order(cfg) == ["p1", "p0"]
    assert order(cfg.replace(lexical_stems=False)) == ["p0", "p1"]
    assert idx.lexical(True) is idx.lexical(True) and idx.lexical(False) is not idx.lexical(True)  # each built once

    configs = {name: method_config(RetrievalConfig(), name) for name in registry.names()}
    assert configs["seem-unstemmed"] == RetrievalConfig(lexical_stems=False)
    assert configs["prior-unstemmed"] == configs["prior"].replace(lexical_stems=False)
    query = EncodedQuery(question, T, vector, [], np.zeros((0, 2), np.float32))
    stemmed = rankers(RetrievalConfig(), ["bm25"])["bm25"](idx, query)
    assert ids(stemmed)[0] == "p1" and stemmed.ranked[0].score > 0
    exact = rankers(RetrievalConfig(lexical_stems=False), ["bm25"])["bm25"](idx, query)
    assert [r.score for r in exact.ranked] == [0.0, 0.0]
