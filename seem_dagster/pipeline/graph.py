"""The graph step: entities from facts, synonym edges (comparing only entities new since the saved
comparison), and the edge table."""

from __future__ import annotations

import time
from dataclasses import dataclass

import polars as pl

from seem_dagster import backends
from seem_dagster.config import SeemConfig
from seem_dagster.graph.build import graph_edges
from seem_dagster.graph.entities import entities_from_facts, synonym_edges
from seem_dagster.pipeline.embedding import cached_embedder, save_vectors
from seem_dagster.schemas import Entities
from seem_dagster.store.cache import ConversationCache

KNOWN, EDGE = "known", "edge"
# How the saved comparisons' weights were computed: edges saved by another way are not continued from.
WEIGHTS = "f64"


@dataclass
class GraphBuilt:
    entities: pl.DataFrame
    edges: pl.DataFrame
    comparisons: int  # entity vector pairs scored for synonyms this run
    new_entities: int  # entities not compared before
    synonym_seconds: float


def build_graph(cache: ConversationCache, facts: pl.DataFrame, config: SeemConfig) -> GraphBuilt:
    entities = entities_from_facts(facts)
    synonyms = config.synonyms
    if synonyms.embedder == "extraction":
        embedder = cached_embedder(cache, config.extraction.embedder)
        vectors = embedder.encode(entities[Entities.name].to_list())
        save_vectors(cache, embedder)
    else:  # a static table: cheaper to encode again than to cache
        embedder = backends.embedder(synonyms.embedder)
        vectors = embedder.encode(entities[Entities.name].to_list())
    name = synonyms_name(embedder.name, config)
    saved = cache.table("synonyms", name)
    known = set(saved.filter(pl.col("kind") == KNOWN)["source"].to_list()) if saved is not None else set()
    # unique: an append's comparisons are segments beside the table (record_comparisons), which a build
    # may have written again into the table
    old_edges = ([tuple(r) for r in saved.filter(pl.col("kind") == EDGE).select("source", "target", "weight").unique(maintain_order=True).iter_rows()]
                 if saved is not None else [])
    ids = entities[Entities.entity_id].to_list()
    started = time.perf_counter()
    result = synonym_edges(ids, vectors, synonyms, previous=old_edges, known=known)
    seconds = time.perf_counter() - started
    cache.put_table("synonyms", name, comparisons_table(result.edges, ids), stored=saved)
    return GraphBuilt(entities, graph_edges(facts, result.edges), result.comparisons, len(set(ids) - known), seconds)


def synonyms_name(embedder_name: str, config: SeemConfig) -> str:
    """The saved comparisons of this embedder and these settings (``ConversationCache`` "synonyms")."""
    return f"{embedder_name}-{config.synonyms.threshold}-{config.synonyms.max_per_node}-{WEIGHTS}"


def comparisons_table(edges, compared: list[str]) -> pl.DataFrame:
    """The saved comparisons: the synonym edges, and every entity compared (the next build compares only others)."""
    return pl.DataFrame({
        "kind": [EDGE] * len(edges) + [KNOWN] * len(compared),
        "source": [a for a, _, _ in edges] + compared,
        "target": [b for _, b, _ in edges] + [""] * len(compared),
        "weight": [w for _, _, w in edges] + [0.0] * len(compared),
    }, schema={"kind": pl.String(), "source": pl.String(), "target": pl.String(), "weight": pl.Float64()})


def record_comparisons(cache: ConversationCache, name: str, edges, compared: list[str]) -> None:
    """An append's comparisons (its new entities' and their edges), written beside the saved ones as a
    segment: the next build continues from them as from a build's."""
    cache.append_rows("synonyms", name, comparisons_table(edges, compared), ["kind", "source", "target"])
