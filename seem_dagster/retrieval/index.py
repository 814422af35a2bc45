"""Everything a query needs for one conversation, held in memory: tables, vectors, the igraph graph."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

from seem_dagster.graph.build import MemoryGraph, to_igraph
from seem_dagster.schemas import Embeddings, Entities, Episodes, Facts, Passages

PASSAGE, FACT, ENTITY, EPISODE = "passage", "fact", "entity", "episode"


def fact_text(subject: str, relation: str, obj: str) -> str:
    return f"{subject} {relation} {obj}"


def passage_text(speaker: str, text: str) -> str:
    return f"{speaker}: {text}"


@dataclass
class MemoryIndex:
    passages: pl.DataFrame
    facts: pl.DataFrame
    entities: pl.DataFrame
    episodes: pl.DataFrame
    graph: MemoryGraph
    passage_vectors: np.ndarray  # aligned with graph.passage_ids (= passages rows)
    fact_vectors: np.ndarray  # aligned with facts rows
    entity_passages: dict[str, int] = field(default_factory=dict)
    episode_of: dict[str, int] = field(default_factory=dict)
    position: dict[str, int] = field(default_factory=dict)

    @classmethod
    def from_tables(
        cls,
        passages: pl.DataFrame,
        facts: pl.DataFrame,
        entities: pl.DataFrame,
        episodes: pl.DataFrame,
        edges: pl.DataFrame,
        vectors: pl.DataFrame,
    ) -> MemoryIndex:
        passages = passages.sort(Passages.session_index, Passages.turn_index)
        graph = to_igraph(passages, entities[Entities.entity_id].to_list(), edges)
        lookup = {
            (k, i): v for k, i, v in zip(vectors[Embeddings.kind].to_list(), vectors[Embeddings.item_id].to_list(), vectors[Embeddings.vector].to_numpy())
        }
        dim = vectors[Embeddings.vector].dtype.size if vectors.height else 384

        def stack(kind, item_ids):
            return np.stack([lookup[(kind, i)] for i in item_ids]).astype(np.float32) if item_ids else np.zeros((0, dim), np.float32)

        return cls(
            passages=passages,
            facts=facts,
            entities=entities,
            episodes=episodes,
            graph=graph,
            passage_vectors=stack(PASSAGE, passages[Passages.passage_id].to_list()),
            fact_vectors=stack(FACT, facts[Facts.fact_id].to_list()),
            entity_passages={e: len(p) for e, p in zip(entities[Entities.entity_id].to_list(), entities[Entities.passage_ids].to_list())},
            episode_of={p: i for i, ps in enumerate(episodes[Episodes.passage_ids].to_list()) for p in ps},
            position={p: i for i, p in enumerate(passages[Passages.passage_id].to_list())},
        )
