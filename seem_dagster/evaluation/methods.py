"""Each method of the registry (``seem_dagster.methods``) as one function: (memory, encoded query) -> a
ranking (RetrievalResult). All methods rank the same passages of the same built memory with the same
embedder; what each is, and which ablation step, is its registry entry. Here only how each kind of
entry ranks: SEEM's retrieval under the entry's settings (retrieval.answer.rank, what `Memory.query`
runs), the flat baselines (dense, BM25, hybrid, hybrid with the prior's reply share), and SEEM with
the property route or with every fact embedded alone.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from seem_dagster import methods as registry
from seem_dagster.config import PropertiesConfig, RetrievalConfig
from seem_dagster.evaluation.prepared import Prepared, conversation_of
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


def _dense(name: str) -> Ranker:
    def rank(index: MemoryIndex, query: EncodedQuery) -> RetrievalResult:
        return _by_score(index, index.passage_vectors @ query.vector, name)

    return rank


def _bm25(name: str, stems: bool) -> Ranker:
    def rank(index: MemoryIndex, query: EncodedQuery) -> RetrievalResult:
        return _by_score(index, index.lexical(stems).scores(query.question), name)

    return rank


def _hybrid(name: str, stems: bool) -> Ranker:
    lexical, dense = _bm25(name, stems), _dense(name)

    def rank(index: MemoryIndex, query: EncodedQuery) -> RetrievalResult:
        fused = rrf_scores([ids(lexical(index, query)), ids(dense(index, query))])
        return _flat(sorted(fused.items(), key=lambda kv: -kv[1]), name)

    return rank


def _hybrid_reply(name: str, share: float, stems: bool) -> Ranker:
    lexical, dense = _bm25(name, stems), _dense(name)

    def rank(index: MemoryIndex, query: EncodedQuery) -> RetrievalResult:
        fused = rrf_scores([ids(lexical(index, query)), ids(dense(index, query))])
        scores = np.array([fused[p] for p in index.graph.passage_ids])
        return _by_score(index, inherit_replies(scores, index.answers_to, share), name)

    return rank


def _seem(config: RetrievalConfig, prepared: Prepared) -> Ranker:
    """SEEM's retrieval under ``config``: the ranking `Memory.query` runs (retrieval.answer.rank), a
    conversation the reranker was fitted on reranked by the fold that never saw it."""

    def ranker(index: MemoryIndex, query: EncodedQuery) -> RetrievalResult:
        return answer.rank(index, query, config, rerankers=prepared.rerankers(index) if config.rerank else None)

    return ranker


def _seem_embedded_facts(config: RetrievalConfig, prepared: Prepared) -> Ranker:
    """``seem`` over the facts' vectors embedded alone (``Prepared.embed_facts_alone``, which the
    evaluation runs for this method): the same memory, only the fact vectors differ."""
    seem = _seem(config, prepared)
    held: list = [None, None]  # (the index, its copy with the other fact vectors): one conversation at a time

    def rank(index: MemoryIndex, query: EncodedQuery) -> RetrievalResult:
        alone = prepared.fact_vectors_alone.get(conversation_of(index))
        if alone is None:
            raise ValueError("this method needs the facts embedded alone: Prepared.embed_facts_alone was not run for this conversation")
        if held[0] is not index:
            variant = copy.copy(index)  # shares the tables, the graph and whatever the index has computed
            variant.fact_vectors = alone
            held[:] = [index, variant]
        return seem(held[1], query)

    return rank


def _seem_properties(config: RetrievalConfig, properties: PropertiesConfig, prepared: Prepared) -> Ranker:
    """SEEM fused with the property route (retrieval/property_route.py)."""
    seem = _seem(config, prepared)

    def rank(index: MemoryIndex, query: EncodedQuery) -> RetrievalResult:
        result = seem(index, query)
        own = query.fact_vectors if config.query_facts else query.fact_vectors[:0]  # as retrieve() takes them
        route = property_ranking(index, query.vector, own, properties)
        by_id = {r.passage_id: r for r in result.ranked}
        order = fuse(ids(result), route, properties.route_weight)
        return replace(result, ranked=[by_id.get(p) or Ranked(p, 0.0, Reason(reasons.PROPERTY_ROUTE)) for p in order])

    return rank


def method_config(base: RetrievalConfig, name: str) -> RetrievalConfig:
    """The retrieval settings a method ranks with: its entry's over the configured tree."""
    return base.replace(**registry.get(name).settings)


def query_encoding(base: RetrievalConfig, method: str) -> str:
    """What a method's query costs before ranking: "none" (BM25), "vector" (the question's vector),
    "vectors" (with the question's without the speakers' names) or "full" (the vectors and the
    question's own facts, read by the extractor or the language model)."""
    entry = registry.get(method)
    if entry.ranks == registry.BM25:
        return "none"
    if entry.ranks in (registry.DENSE, registry.HYBRID, registry.HYBRID_REPLY):
        return "vector"
    config = method_config(base, method)
    if not config.query_facts or not (config.use_graph or config.fact_key_weight):
        return "vectors" if config.matches_unnamed else "vector"
    return "full"


def reads_form(base: RetrievalConfig, method: str) -> bool:
    """Whether a method's query needs to know if the question asks for several things (a tagging)."""
    entry = registry.get(method)
    return entry.ranks not in (registry.DENSE, registry.BM25, registry.HYBRID, registry.HYBRID_REPLY) and \
        method_config(base, method).reads_form


def rankers(base: RetrievalConfig, methods: Sequence[str] | None = None, properties: PropertiesConfig | None = None,
            prepared: Prepared | None = None) -> dict[str, Ranker]:
    """name -> ranking function of each method (default: the registry's default methods); ``prepared``:
    what the evaluation prepared for them (default: the reranker's folds, when a method reranks)."""
    methods = registry.defaults() if methods is None else methods
    if prepared is None:
        prepared = Prepared.for_methods(methods, any(method_config(base, m).rerank for m in methods))
    out: dict[str, Ranker] = {}
    for name in methods:
        entry = registry.get(name)
        config = method_config(base, name)
        if entry.ranks == registry.SEEM:
            out[name] = _seem(config, prepared)
        elif entry.ranks == registry.DENSE:
            out[name] = _dense(name)
        elif entry.ranks == registry.BM25:
            out[name] = _bm25(name, config.lexical_stems)
        elif entry.ranks == registry.HYBRID:
            out[name] = _hybrid(name, config.lexical_stems)
        elif entry.ranks == registry.HYBRID_REPLY:
            out[name] = _hybrid_reply(name, config.answer_share, config.lexical_stems)
        elif entry.ranks == registry.PROPERTY_ROUTE:
            out[name] = _seem_properties(config, properties or PropertiesConfig(), prepared)
        elif entry.ranks == registry.EMBEDDED_FACTS:
            out[name] = _seem_embedded_facts(config, prepared)
        else:  # pragma: no cover (register() refuses any other)
            raise ValueError(f"method {name!r} ranks by {entry.ranks!r}, which no ranker builds")
    return out
