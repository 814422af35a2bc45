"""entities, graph_edges and retrieval_index: SEEM's graph layer and the vectors queries search."""

import polars as pl
from dagster import AssetExecutionContext, AssetIn, AssetOut, MetadataValue, Output, ResourceParam, asset, multi_asset

from seem_dagster.config import SeemConfig
from seem_dagster.defs.checks import check_specs, run_checks
from seem_dagster.defs.metadata import table_metadata
from seem_dagster.defs.partitions import conversations
from seem_dagster.pipeline.graph import build_graph as graph_step
from seem_dagster.pipeline.index import build_retrieval_index
from seem_dagster.schemas import Entities, GraphEdges
from seem_dagster.store.cache import ConversationCache

GROUP = "graph"
KINDS = {"parquet", "polars"}


@multi_asset(
    partitions_def=conversations,
    ins={"facts": AssetIn(), "passages": AssetIn()},
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
    check_specs=check_specs("entities", "graph_edges"),
)
def build_graph(context: AssetExecutionContext, facts: pl.DataFrame, passages: pl.DataFrame, seem: ResourceParam[SeemConfig]):
    built = graph_step(ConversationCache(seem.store.root, context.partition_key), facts, seem)
    entities, edges = built.entities, built.edges
    counts = edges.group_by(GraphEdges.kind).len().sort(GraphEdges.kind)
    yield Output(
        entities,
        output_name="entities",
        metadata={
            **table_metadata(entities, [Entities.entity_id, Entities.name, Entities.aliases], text=[Entities.name, Entities.aliases]),
            "merged_spellings": MetadataValue.int(int(entities[Entities.aliases].list.len().sum() or 0) - entities.height),
        },
    )
    yield Output(
        edges,
        output_name="graph_edges",
        metadata={
            **table_metadata(edges),
            "edges_by_kind": MetadataValue.json(dict(counts.iter_rows())),
            "synonym_comparisons": MetadataValue.int(built.comparisons),
            "new_entities_compared": MetadataValue.int(built.new_entities),
            "synonym_seconds": MetadataValue.float(round(built.synonym_seconds, 3)),
            "synonym_config": MetadataValue.json(seem.synonyms.model_dump()),
        },
    )
    yield from run_checks({"entities": entities, "graph_edges": edges}, passages=passages)


@asset(
    partitions_def=conversations,
    ins={"passages": AssetIn(), "facts": AssetIn()},
    group_name=GROUP, kinds=KINDS | {"pytorch"}, io_manager_key="snapshot_io_manager",
    description="Embeddings of passages, their sentences and facts (one table, by item kind): what queries score.",
    check_specs=check_specs("retrieval_index"),
)
def retrieval_index(context: AssetExecutionContext, passages: pl.DataFrame, facts: pl.DataFrame, seem: ResourceParam[SeemConfig]):
    built = build_retrieval_index(ConversationCache(seem.store.root, context.partition_key), passages, facts, seem)
    yield Output(
        built.table,
        metadata={
            "dagster/row_count": MetadataValue.int(built.table.height),
            "by_kind": MetadataValue.json(built.by_kind),
            "model": MetadataValue.text(built.model),
            "embedded": MetadataValue.int(built.embedded),
            "cache_hits": MetadataValue.int(built.cache_hits),
            "seconds": MetadataValue.float(round(built.seconds, 2)),
        },
    )
    yield from run_checks({"retrieval_index": built.table})
