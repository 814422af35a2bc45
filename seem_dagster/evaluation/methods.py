"""Every compared method as one function: (memory, encoded query) -> passage ids, best first.

All methods rank the same passages of the same built memory with the same embedder. Read as an
ablation, each step adds one part of SEEM to the one before:

    prior           the passage prior alone: dense cosine + scaled BM25 + a reply's share of its question
    seem-no-rpe     + the graph (fact seeds, personalized PageRank over the prior)
    seem-no-fusion  + RPE from the anchor's session neighbours, replies and name links (no episodes)
    seem            + the fused episodes in RPE
    seem+properties + the property route: the histories of the best-matching properties (retrieval/property_route.py)

``prior+rpe`` is RPE without the graph; ``hybrid+reply`` gives hybrid's scores the prior's reply
share, so no heuristic of the prior is counted as structure.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from seem_dagster.config import METHODS, PropertiesConfig, RetrievalConfig
from seem_dagster.retrieval.index import MemoryIndex
from seem_dagster.retrieval.property_route import fuse, property_ranking
from seem_dagster.retrieval.query import EncodedQuery
from seem_dagster.retrieval.search import inherit_replies, retrieve

RRF_K = 60

Ranker = Callable[[MemoryIndex, EncodedQuery], list[str]]


ABLATION = ("prior", "seem-no-rpe", "seem-no-fusion", "seem", "seem+properties")  # each row adds one part (module docstring)


def rrf_scores(rankings: Sequence[Sequence[str]], k: int = RRF_K) -> dict[str, float]:
    score: dict[str, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            score[item] = score.get(item, 0.0) + 1.0 / (k + rank)
    return score


def reciprocal_rank_fusion(rankings: Sequence[Sequence[str]], k: int = RRF_K) -> list[str]:
    score = rrf_scores(rankings, k)
    return sorted(score, key=lambda item: -score[item])


def _by_score(index: MemoryIndex, scores: np.ndarray) -> list[str]:
    ids = index.graph.passage_ids
    return [ids[i] for i in np.argsort(-scores, kind="stable")]


def dense(index: MemoryIndex, query: EncodedQuery) -> list[str]:
    return _by_score(index, index.passage_vectors @ query.vector)


def bm25(index: MemoryIndex, query: EncodedQuery) -> list[str]:
    return _by_score(index, index.lexical.scores(query.question))


def hybrid(index: MemoryIndex, query: EncodedQuery) -> list[str]:
    return reciprocal_rank_fusion([bm25(index, query), dense(index, query)])


def _hybrid_reply(share: float) -> Ranker:
    def rank(index: MemoryIndex, query: EncodedQuery) -> list[str]:
        fused = rrf_scores([bm25(index, query), dense(index, query)])
        scores = np.array([fused[p] for p in index.graph.passage_ids])
        return _by_score(index, inherit_replies(scores, index.answers_to, share))

    return rank


def _seem(config: RetrievalConfig) -> Ranker:
    def rank(index: MemoryIndex, query: EncodedQuery) -> list[str]:
        result = retrieve(index, query.vector, query.fact_vectors, config, question_text=query.question)
        return [r.passage_id for r in result.ranked]

    return rank


def _seem_properties(config: RetrievalConfig, properties: PropertiesConfig) -> Ranker:
    """SEEM fused with the property route (retrieval/property_route.py)."""
    seem = _seem(config)

    def rank(index: MemoryIndex, query: EncodedQuery) -> list[str]:
        route = property_ranking(index, query.vector, query.fact_vectors, properties)
        return fuse(seem(index, query), route, properties.route_weight)

    return rank


def rankers(base: RetrievalConfig, methods: Sequence[str] = METHODS, properties: PropertiesConfig | None = None) -> dict[str, Ranker]:
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise ValueError(f"unknown method(s) {', '.join(unknown)}; choose from {', '.join(METHODS)}")
    table: dict[str, Ranker] = {
        "seem": _seem(base),
        "seem-no-rpe": _seem(base.replace(use_rpe=False)),
        "seem-no-fusion": _seem(base.replace(rpe_scope="session")),
        "prior": _seem(base.replace(use_graph=False, use_rpe=False)),
        "prior+rpe": _seem(base.replace(use_graph=False)),
        "graph-only": _seem(base.replace(passage_share=0.0)),
        "dense": dense,
        "bm25": bm25,
        "hybrid": hybrid,
        "hybrid+reply": _hybrid_reply(base.answer_share),
        "seem+properties": _seem_properties(base, properties or PropertiesConfig()),
    }
    return {m: table[m] for m in methods}
