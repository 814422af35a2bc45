"""entities, graph_edges and retrieval_index: SEEM's graph layer and the vectors queries search."""

import time

import numpy as np
import polars as pl
from dagster import AssetExecutionContext, AssetIn, AssetOut, MetadataValue, Output, asset, multi_asset

from seem_dagster import backends
from seem_dagster.defs.metadata import table_metadata
from seem_dagster.defs.partitions import conversations
from seem_dagster.defs.resources import MemorySettings, SeemSettings
from seem_dagster.embeddings import CachedEmbedder
from seem_dagster.graph.build import graph_edges as build_edges
from seem_dagster.graph.entities import SynonymConfig, entities_from_facts, synonym_edges
from seem_dagster.retrieval.index import ENTITY, EPISODE, FACT, PASSAGE, fact_text, passage_text
from seem_dagster.schemas import Entities, Episodes, Facts, GraphEdges, Passages, embeddings_frame
from seem_dagster.store.cache import cache_path, read_cache_table, write_cache_table

GROUP = "graph"
KINDS = {"parquet", "polars"}


def _embedder(settings: SeemSettings, memory: MemorySettings, key: str):
    """The conversation's one text-hash vector cache, shared with `episodes`: entity names and
    single-frame episode summaries are embedded once, not once per asset."""
    base = backends.embedder(memory.embedder)
    path = cache_path(settings.root(), "embeddings", base.name, key)
    return CachedEmbedder(base, read_cache_table(path)), path


@multi_asset(
    partitions_def=conversations,
    ins={"facts": AssetIn()},
    outs={
        "entities": AssetOut(
            description="Entities named by facts, merged on their normalised name (aliases kept), with the passages they appear in.",
            group_name=GROUP, kinds=KINDS, io_manager_key="snapshot_io_manager",
        ),
        "graph_edges": AssetOut(
            description="Undirected graph edges: fact (subject-object, weight = count), mention (passage-entity) and "
            "synonym (entity-entity, weight = cosine). Loaded into igraph for personalized PageRank.",
            group_name=GROUP, kinds=KINDS | {"igraph"}, io_manager_key="snapshot_io_manager",
        ),
    },
)
def build_graph(context: AssetExecutionContext, facts: pl.DataFrame, settings: SeemSettings, memory: MemorySettings):
    key = context.partition_key
    entities = entities_from_facts(facts)
    embedder, emb_path = _embedder(settings, memory, key)
    vectors = embedder.encode(entities[Entities.name].to_list())
    if embedder.added:
        write_cache_table(emb_path, embedder.table())
    config = SynonymConfig(memory.synonym_threshold, memory.synonym_max_per_node)
    syn_path = cache_path(settings.root(), "synonyms", f"{embedder.name}-{config.threshold}-{config.max_per_node}", key)
    previous = read_cache_table(syn_path)
    known = set(previous.filter(pl.col("kind") == "known")["source"].to_list()) if previous is not None else set()
    old_edges = (
        [tuple(r) for r in previous.filter(pl.col("kind") == "edge").select("source", "target", "weight").iter_rows()]
        if previous is not None else []
    )
    started = time.perf_counter()
    result = synonym_edges(entities[Entities.entity_id].to_list(), vectors, config, previous=old_edges, known=known)
    seconds = time.perf_counter() - started
    ids = entities[Entities.entity_id].to_list()
    write_cache_table(
        syn_path,
        pl.DataFrame(
            {
                "kind": ["edge"] * len(result.edges) + ["known"] * len(ids),
                "source": [a for a, _, _ in result.edges] + ids,
                "target": [b for _, b, _ in result.edges] + [""] * len(ids),
                "weight": [w for _, _, w in result.edges] + [0.0] * len(ids),
            }
        ),
    )
    edges = build_edges(facts, result.edges)
    counts = edges.group_by(GraphEdges.kind).len().sort(GraphEdges.kind)
    yield Output(
        entities,
        output_name="entities",
        metadata={
            **table_metadata(entities, [Entities.name, Entities.aliases]),
            "merged_spellings": MetadataValue.int(int(entities[Entities.aliases].list.len().sum() or 0) - entities.height),
        },
    )
    yield Output(
        edges,
        output_name="graph_edges",
        metadata={
            **table_metadata(edges),
            "edges_by_kind": MetadataValue.json(dict(counts.iter_rows())),
            "synonym_comparisons": MetadataValue.int(result.comparisons),
            "new_entities_compared": MetadataValue.int(len(set(ids) - known)),
            "synonym_seconds": MetadataValue.float(round(seconds, 3)),
            "synonym_config": MetadataValue.json({"threshold": config.threshold, "max_per_node": config.max_per_node}),
        },
    )


@asset(
    partitions_def=conversations,
    ins={"passages": AssetIn(), "facts": AssetIn(), "entities": AssetIn(), "episodes": AssetIn()},
    group_name=GROUP, kinds=KINDS | {"pytorch"}, io_manager_key="snapshot_io_manager",
    description="Embeddings of passages, facts, entities and episodes (one table, by item kind): what queries search.",
)
def retrieval_index(
    context: AssetExecutionContext, passages: pl.DataFrame, facts: pl.DataFrame, entities: pl.DataFrame,
    episodes: pl.DataFrame, settings: SeemSettings, memory: MemorySettings,
):
    embedder, path = _embedder(settings, memory, context.partition_key)
    parts = {
        PASSAGE: (passages[Passages.passage_id].to_list(),
                  [passage_text(s, t) for s, t in zip(passages[Passages.speaker].to_list(), passages[Passages.text].to_list())]),
        FACT: (facts[Facts.fact_id].to_list(),
               [fact_text(*r) for r in facts.select(Facts.subject, Facts.relation, Facts.object).iter_rows()]),
        ENTITY: (entities[Entities.entity_id].to_list(), entities[Entities.name].to_list()),
        EPISODE: (episodes[Episodes.episode_id].to_list(), episodes[Episodes.summary].to_list()),
    }
    started = time.perf_counter()
    frames = [embeddings_frame(kind, item_ids, embedder.encode(texts) if texts else np.zeros((0, embedder.dim), np.float32), embedder.name)
              for kind, (item_ids, texts) in parts.items()]
    seconds = time.perf_counter() - started
    if embedder.added:
        write_cache_table(path, embedder.table())
    table = pl.concat(frames)
    return Output(
        table,
        metadata={
            "dagster/row_count": MetadataValue.int(table.height),
            "by_kind": MetadataValue.json({k: len(v[0]) for k, v in parts.items()}),
            "model": MetadataValue.text(embedder.name),
            "embedded": MetadataValue.int(embedder.misses),
            "cache_hits": MetadataValue.int(embedder.hits),
            "seconds": MetadataValue.float(round(seconds, 2)),
        },
    )
