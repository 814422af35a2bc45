"""The retrieval index step: vectors of the passages, their sentences and the facts that queries score."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import polars as pl

from seem_dagster.config import SeemConfig
from seem_dagster.embeddings import CachedEmbedder
from seem_dagster.pipeline.embedding import cached_embedder, save_vectors
from seem_dagster.retrieval.index import FACT, PASSAGE, SENTENCE, fact_text, passage_spans, passage_text
from seem_dagster.schemas import Facts, Passages, embeddings_frame
from seem_dagster.store.cache import ConversationCache


@dataclass
class IndexBuilt:
    table: pl.DataFrame
    by_kind: dict[str, int]
    model: str
    embedded: int
    cache_hits: int
    seconds: float


def build_retrieval_index(cache: ConversationCache, passages: pl.DataFrame, facts: pl.DataFrame, config: SeemConfig) -> IndexBuilt:
    embedder = cached_embedder(cache, config.extraction.embedder)
    started = time.perf_counter()
    table, by_kind = index_rows(embedder, passages, facts, config.extraction.fact_vectors == "pooled")
    seconds = time.perf_counter() - started
    save_vectors(cache, embedder)
    return IndexBuilt(table, by_kind, embedder.name, embedder.misses, embedder.hits, seconds)


def index_rows(embedder: CachedEmbedder, passages: pl.DataFrame, facts: pl.DataFrame, pooled_facts: bool
               ) -> tuple[pl.DataFrame, dict[str, int]]:
    """The index rows of ``passages`` and of ``facts`` (theirs): a build's whole table, or an append's
    new rows. Returns the rows and how many of each kind."""
    passage_ids = passages[Passages.passage_id].to_list()
    texts = [passage_text(s, t) for s, t in zip(passages[Passages.speaker].to_list(), passages[Passages.text].to_list())]
    # The passages' vectors, their sentences' and their facts' pooled vectors come from one forward pass
    # (the episodes step has usually made them already: then all are cache hits).
    spans = passage_spans(passages, facts, pooled_facts)
    passage_vectors, pooled = embedder.encode_pooled(texts, [[r for _, _, r in spans.get(p, [])] for p in passage_ids])
    kept = {FACT: {}, SENTENCE: {}}
    for p, vs in zip(passage_ids, pooled):
        for (kind, item, _), v in zip(spans.get(p, []), vs):
            if v is not None:
                kept[kind][item] = v
    fact_vector, sentence_vector = kept[FACT], kept[SENTENCE]
    fact_ids = facts[Facts.fact_id].to_list()
    alone = [(f, fact_text(*r)) for f, r in zip(fact_ids, facts.select(Facts.subject, Facts.relation, Facts.object).iter_rows())
             if f not in fact_vector]
    fact_vector.update(zip([f for f, _ in alone], embedder.encode([t for _, t in alone])))
    frames = [embeddings_frame(PASSAGE, passage_ids, passage_vectors, embedder.name, embedder.dim),
              embeddings_frame(FACT, fact_ids, stacked([fact_vector[f] for f in fact_ids], embedder.dim), embedder.name, embedder.dim),
              embeddings_frame(SENTENCE, list(sentence_vector), stacked(list(sentence_vector.values()), embedder.dim),
                               embedder.name, embedder.dim)]
    return pl.concat(frames), {PASSAGE: len(passage_ids), FACT: len(fact_ids), "pooled facts": len(fact_ids) - len(alone),
                               SENTENCE: len(sentence_vector)}


def stacked(vectors: list[np.ndarray], dim: int) -> np.ndarray:
    return np.stack(vectors) if vectors else np.zeros((0, dim), np.float32)
