"""Every compared method as one function: (memory, encoded query) -> a ranking (RetrievalResult).

All methods rank the same passages of the same built memory with the same embedder. Read as an
ablation, each step adds one part of SEEM to the one before:

    prior           the passage prior alone: dense cosine + scaled BM25 + a reply's share of its question
    prior+facts     + facts as retrieval keys (a passage gains its best fact's match)
    seem-no-rpe     + the walk (fact seeds, personalized PageRank over that prior)
    seem-no-fusion  + RPE from the anchor's session neighbours, replies and name links (no episodes)
    seem            + the fused episodes in RPE
    seem+query-facts + the question's own facts matched against the memory's (retrieval.query_facts)
    seem+properties + the property route: the histories of the best-matching properties (retrieval/property_route.py)

``seem+rerank`` and ``prior+rerank`` reorder the top passages of seem's and the prior's ranking by
each one's fitted model (retrieval/rerank.py; ``retrieval.rerank``), so what a learned reranking adds
is measured on both sides and never counted as structure.

``seem-no-synonyms`` is ``seem`` walking the same graph without its synonym edges between entity
names; ``seem-embedded-facts`` is ``seem`` with every fact's vector embedded alone instead of pooled
from its passage's forward pass (as the build does for most facts); ``seem-named`` and
``prior-named`` match only the question as asked, not also the question without the speakers' names
(``retrieval.unnamed_weight`` and ``unnamed_fact_weight`` 0), ``seem-named-facts`` so only against the
facts (``unnamed_fact_weight`` 0); ``seem-unstemmed`` and ``prior-unstemmed`` match BM25's words
exactly, not by their stems (``retrieval.lexical_stems`` false); ``seem-rpe-on-lists`` expands a
question that asks for several things with RPE too (``retrieval.list_breadth`` false); ``prior+rpe``
is RPE without the fact layer; ``hybrid+reply`` gives hybrid's scores the prior's reply share, so no
heuristic of the prior is counted as structure.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from seem_dagster.config import METHODS, PropertiesConfig, RetrievalConfig
from seem_dagster.retrieval import answer, reasons
from seem_dagster.retrieval.index import MemoryIndex
from seem_dagster.retrieval.property_route import fuse, property_ranking
from seem_dagster.retrieval.query import EncodedQuery
from seem_dagster.retrieval.reasons import Reason
from seem_dagster.retrieval.search import Ranked, RetrievalResult, inherit_replies

RRF_K = 60

Ranker = Callable[[MemoryIndex, EncodedQuery], RetrievalResult]



def rrf_scores(rankings: Sequence[Sequence[str]], k: int = RRF_K) -> dict[str, float]:
    score: dict[str, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            score[item] = score.get(item, 0.0) + 1.0 / (k + rank)
    return score


def _by_score(index: MemoryIndex, scores: np.ndarray, mode: str) -> RetrievalResult:
    ids = index.graph.passage_ids
    return _flat([(ids[i], float(scores[i])) for i in np.argsort(-scores, kind="stable")], mode)


def _flat(scored: Sequence[tuple[str, float]], mode: str) -> RetrievalResult:
    """A baseline's ranking: no seed facts, no episodes, so its context is its turns alone."""
    why = reasons.baseline(mode)
    return RetrievalResult([Ranked(p, s, why) for p, s in scored], [], mode, [])


def ids(result: RetrievalResult) -> list[str]:
    return [r.passage_id for r in result.ranked]


def dense(index: MemoryIndex, query: EncodedQuery) -> RetrievalResult:
    return _by_score(index, index.passage_vectors @ query.vector, "dense")


def _bm25(stems: bool) -> Ranker:
    def rank(index: MemoryIndex, query: EncodedQuery) -> RetrievalResult:
        return _by_score(index, index.lexical(stems).scores(query.question), "bm25")

    return rank


def _hybrid(stems: bool) -> Ranker:
    lexical = _bm25(stems)

    def rank(index: MemoryIndex, query: EncodedQuery) -> RetrievalResult:
        fused = rrf_scores([ids(lexical(index, query)), ids(dense(index, query))])
        return _flat(sorted(fused.items(), key=lambda kv: -kv[1]), "hybrid")

    return rank


def _hybrid_reply(share: float, stems: bool) -> Ranker:
    lexical = _bm25(stems)

    def rank(index: MemoryIndex, query: EncodedQuery) -> RetrievalResult:
        fused = rrf_scores([ids(lexical(index, query)), ids(dense(index, query))])
        scores = np.array([fused[p] for p in index.graph.passage_ids])
        return _by_score(index, inherit_replies(scores, index.answers_to, share), "hybrid+reply")

    return rank


def _seem(config: RetrievalConfig) -> Ranker:
    """SEEM's retrieval under ``config``: the ranking `Memory.query` runs (retrieval.answer.rank)."""

    def ranker(index: MemoryIndex, query: EncodedQuery) -> RetrievalResult:
        return answer.rank(index, query, config)

    return ranker


def _seem_embedded_facts(config: RetrievalConfig) -> Ranker:
    """``seem`` over the facts' vectors embedded alone (MemoryIndex.embedded_fact_vectors, which the
    evaluation computes for this method): the same memory, only the fact vectors differ."""
    seem = _seem(config)
    held: list = [None, None]  # (the index, its copy with the other fact vectors): one conversation at a time

    def rank(index: MemoryIndex, query: EncodedQuery) -> RetrievalResult:
        if index.embedded_fact_vectors is None:
            raise ValueError("seem-embedded-facts needs the facts embedded alone: MemoryIndex.embedded_fact_vectors is not set")
        if held[0] is not index:
            variant = copy.copy(index)  # shares the tables, the graph and whatever the index has computed
            variant.fact_vectors = index.embedded_fact_vectors
            held[:] = [index, variant]
        return seem(held[1], query)

    return rank


def _seem_properties(config: RetrievalConfig, properties: PropertiesConfig) -> Ranker:
    """SEEM fused with the property route (retrieval/property_route.py)."""
    seem = _seem(config)

    def rank(index: MemoryIndex, query: EncodedQuery) -> RetrievalResult:
        result = seem(index, query)
        own = query.fact_vectors if config.query_facts else query.fact_vectors[:0]  # as retrieve() takes them
        route = property_ranking(index, query.vector, own, properties)
        by_id = {r.passage_id: r for r in result.ranked}
        order = fuse(ids(result), route, properties.route_weight)
        return replace(result, ranked=[by_id.get(p) or Ranked(p, 0.0, Reason(reasons.PROPERTY_ROUTE)) for p in order])

    return rank


# What reading the question adds (its time, its events, whether it asks for the latest, a request for
# advice): off for the flat prior and its variants, on (as configured) from the chain's second step.
UNREAD = {"time_weight": 0.0, "time_fact_weight": 0.0, "split_events": False, "latest_first": False, "advice_lexical": 1.0}


def retrieval_configs(base: RetrievalConfig) -> dict[str, RetrievalConfig]:
    """The methods that are SEEM's retrieval with some parts off, by name."""
    flat = {"use_graph": False, "use_rpe": False, "fact_key_weight": 0.0, "rerank": False}
    return {
        "seem": base,
        "seem+query-facts": base.replace(query_facts=True),
        # The chain's steps (evaluation/ablation.py) never rerank: with retrieval.rerank on, seem's last step includes it.
        "seem-no-rpe": base.replace(use_rpe=False, rerank=False),
        "seem-no-fusion": base.replace(rpe_scope="session", rerank=False),
        "seem+rerank": base.replace(rerank=True),
        "seem-no-synonyms": base.replace(use_synonyms=False),
        "seem-named": base.replace(unnamed_weight=0.0, unnamed_fact_weight=0.0),
        "seem-named-facts": base.replace(unnamed_fact_weight=0.0),
        "seem-unstemmed": base.replace(lexical_stems=False),
        "seem-rpe-on-lists": base.replace(list_breadth=False),
        "seem-no-time": base.replace(time_weight=0.0, time_fact_weight=0.0),
        "seem+events": base.replace(split_events=True),
        "seem-no-latest": base.replace(latest_first=False),
        "seem-no-advice": base.replace(advice_lexical=1.0),
        "prior": base.replace(**flat, **UNREAD),
        # The prior reordered by its own fitted model: what a reranker adds without the structure.
        "prior+rerank": base.replace(**{**flat, "rerank": True}, **UNREAD),
        "prior-named": base.replace(**flat, **UNREAD, unnamed_weight=0.0, unnamed_fact_weight=0.0),
        "prior-unstemmed": base.replace(**flat, **UNREAD, lexical_stems=False),
        "prior+reading": base.replace(**flat),
        "prior+facts": base.replace(use_graph=False, use_rpe=False, rerank=False),
        "prior+rpe": base.replace(use_graph=False, fact_key_weight=0.0, rerank=False, **UNREAD),
        "graph-only": base.replace(passage_share=0.0, rerank=False),
        "seem+properties": base,
        "seem-embedded-facts": base,
    }


def query_encoding(base: RetrievalConfig, method: str) -> str:
    """What a method's query costs before ranking: "none" (BM25), "vector" (the question's vector),
    "vectors" (with the question's without the speakers' names) or "full" (the vectors and the
    question's own facts, read by the extractor or the language model)."""
    if method == "bm25":
        return "none"
    config = retrieval_configs(base).get(method)
    if config is None:
        return "vector"
    if not config.query_facts or not (config.use_graph or config.fact_key_weight):
        return "vectors" if config.matches_unnamed else "vector"
    return "full"


def reads_form(base: RetrievalConfig, method: str) -> bool:
    """Whether a method's query needs to know if the question asks for several things (a tagging)."""
    config = retrieval_configs(base).get(method)
    return bool(config is not None and config.reads_form)


def rankers(base: RetrievalConfig, methods: Sequence[str] = METHODS, properties: PropertiesConfig | None = None) -> dict[str, Ranker]:
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise ValueError(f"unknown method(s) {', '.join(unknown)}; choose from {', '.join(METHODS)}")
    table: dict[str, Ranker] = {name: _seem(config) for name, config in retrieval_configs(base).items()} | {
        "dense": dense,
        "bm25": _bm25(base.lexical_stems),
        "hybrid": _hybrid(base.lexical_stems),
        "hybrid+reply": _hybrid_reply(base.answer_share, base.lexical_stems),
        "seem+properties": _seem_properties(base, properties or PropertiesConfig()),
        "seem-embedded-facts": _seem_embedded_facts(base),
    }
    return {m: table[m] for m in methods}
