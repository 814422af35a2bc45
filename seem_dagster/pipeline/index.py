"""The retrieval index step: vectors of the passages and facts that queries score."""

from __future__ import annotations

import time
from dataclasses import dataclass

import polars as pl

from seem_dagster.config import SeemConfig
from seem_dagster.pipeline.embedding import cached_embedder, save_vectors
from seem_dagster.retrieval.index import FACT, PASSAGE, fact_text, passage_text
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
    parts = {
        PASSAGE: (passages[Passages.passage_id].to_list(),
                  [passage_text(s, t) for s, t in zip(passages[Passages.speaker].to_list(), passages[Passages.text].to_list())]),
        FACT: (facts[Facts.fact_id].to_list(),
               [fact_text(*r) for r in facts.select(Facts.subject, Facts.relation, Facts.object).iter_rows()]),
    }
    started = time.perf_counter()
    frames = [embeddings_frame(kind, item_ids, embedder.encode(texts), embedder.name, embedder.dim) for kind, (item_ids, texts) in parts.items()]
    seconds = time.perf_counter() - started
    save_vectors(cache, embedder)
    return IndexBuilt(pl.concat(frames), {k: len(v[0]) for k, v in parts.items()}, embedder.name, embedder.misses,
                      embedder.hits, seconds)
