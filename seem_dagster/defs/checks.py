"""Asset checks: table schemas (blocking: nothing downstream runs on a bad table) and pointer integrity."""


import warnings

import pandera.errors
import polars as pl
from dagster import AssetCheckResult, AssetCheckSeverity, AssetIn, MetadataValue, PreviewWarning, asset_check

from seem_dagster.defs.metadata import markdown_table
from seem_dagster.defs.partitions import conversations
from seem_dagster.schemas import Entities, Episodes, EventFrames, Facts, GraphEdges, LlmCalls, Passages, Questions

# Checks must be partitioned like their assets (unpartitioned ones load every partition); Dagster
# 1.13 marks that as preview. We rely on it knowingly, so the warning is not repeated on every load.
warnings.filterwarnings("ignore", category=PreviewWarning, message="Specifying a partitions_def on an AssetCheckSpec")


def schema_result(model, frame: pl.DataFrame) -> AssetCheckResult:
    try:
        model.validate(frame, lazy=True)
    except pandera.errors.SchemaErrors as err:
        cases = pl.from_pandas(err.failure_cases) if hasattr(err.failure_cases, "to_dict") else err.failure_cases
        return AssetCheckResult(
            passed=False,
            severity=AssetCheckSeverity.ERROR,
            metadata={
                "failures": MetadataValue.int(cases.height),
                "failure_cases": MetadataValue.md(markdown_table(cases.cast(pl.String, strict=False), rows=20)),
            },
        )
    return AssetCheckResult(passed=True, metadata={"rows": MetadataValue.int(frame.height)})


@asset_check(partitions_def=conversations, asset="passages", blocking=True, description="passages match the Passages schema (pandera)")
def passages_schema(passages: pl.DataFrame) -> AssetCheckResult:
    return schema_result(Passages, passages)


@asset_check(partitions_def=conversations, asset="questions", blocking=True, description="questions match the Questions schema (pandera)")
def questions_schema(questions: pl.DataFrame) -> AssetCheckResult:
    return schema_result(Questions, questions)


@asset_check(partitions_def=conversations, asset="llm_calls", blocking=True, description="llm_calls match the LlmCalls schema (pandera)")
def llm_calls_schema(llm_calls: pl.DataFrame) -> AssetCheckResult:
    return schema_result(LlmCalls, llm_calls)


@asset_check(partitions_def=conversations, asset="event_frames", blocking=True, description="event_frames match the EventFrames schema (pandera)")
def event_frames_schema(event_frames: pl.DataFrame) -> AssetCheckResult:
    return schema_result(EventFrames, event_frames)


@asset_check(partitions_def=conversations, asset="facts", blocking=True, description="facts match the Facts schema (pandera)")
def facts_schema(facts: pl.DataFrame) -> AssetCheckResult:
    return schema_result(Facts, facts)


@asset_check(partitions_def=conversations, asset="episodes", blocking=True, description="episodes match the Episodes schema (pandera)")
def episodes_schema(episodes: pl.DataFrame) -> AssetCheckResult:
    return schema_result(Episodes, episodes)


def provenance_result(pointers: list[str], passages: pl.DataFrame, *, cover_all: bool = False) -> AssetCheckResult:
    known = set(passages[Passages.passage_id].to_list())
    dangling = sorted(set(pointers) - known)
    missing = sorted(known - set(pointers)) if cover_all else []
    metadata = {
        "pointers": MetadataValue.int(len(pointers)),
        "dangling": MetadataValue.int(len(dangling)),
        "dangling_sample": MetadataValue.text(", ".join(dangling[:10]) or "none"),
    }
    if cover_all:
        metadata["passages_not_covered"] = MetadataValue.int(len(missing))
        metadata["not_covered_sample"] = MetadataValue.text(", ".join(missing[:10]) or "none")
    return AssetCheckResult(passed=not dangling and not missing, metadata=metadata)


@asset_check(
    partitions_def=conversations,
    asset="event_frames", blocking=True, additional_ins={"passages": AssetIn("passages")},
    description="every frame points to an existing passage, and every passage has a frame",
)
def event_frames_provenance(event_frames: pl.DataFrame, passages: pl.DataFrame) -> AssetCheckResult:
    return provenance_result(event_frames[EventFrames.passage_id].to_list(), passages, cover_all=True)


@asset_check(
    partitions_def=conversations,
    asset="facts", blocking=True, additional_ins={"passages": AssetIn("passages")},
    description="every fact points to an existing passage",
)
def facts_provenance(facts: pl.DataFrame, passages: pl.DataFrame) -> AssetCheckResult:
    return provenance_result(facts[Facts.passage_id].to_list(), passages)


@asset_check(
    partitions_def=conversations,
    asset="episodes", blocking=True, additional_ins={"passages": AssetIn("passages")},
    description="every episode pointer resolves, and every passage is in an episode (fusion never loses a turn)",
)
def episodes_provenance(episodes: pl.DataFrame, passages: pl.DataFrame) -> AssetCheckResult:
    pointers = [p for ps in episodes[Episodes.passage_ids].to_list() for p in ps]
    return provenance_result(pointers, passages, cover_all=True)


@asset_check(partitions_def=conversations, asset="entities", blocking=True, description="entities match the Entities schema (pandera)")
def entities_schema(entities: pl.DataFrame) -> AssetCheckResult:
    return schema_result(Entities, entities)


@asset_check(
    partitions_def=conversations,
    asset="graph_edges", blocking=True,
    additional_ins={"passages": AssetIn("passages"), "entities": AssetIn("entities")},
    description="graph_edges match the schema and every edge joins existing passage or entity nodes",
)
def graph_edges_integrity(graph_edges: pl.DataFrame, passages: pl.DataFrame, entities: pl.DataFrame) -> AssetCheckResult:
    result = schema_result(GraphEdges, graph_edges)
    if not result.passed:
        return result
    nodes = set(passages[Passages.passage_id].to_list()) | set(entities[Entities.entity_id].to_list())
    ends = set(graph_edges[GraphEdges.source].to_list()) | set(graph_edges[GraphEdges.target].to_list())
    dangling = sorted(ends - nodes)
    return AssetCheckResult(
        passed=not dangling,
        metadata={"edges": MetadataValue.int(graph_edges.height), "dangling_nodes": MetadataValue.int(len(dangling))},
    )


CHECKS = [
    entities_schema, graph_edges_integrity,
    passages_schema, questions_schema, llm_calls_schema, event_frames_schema, facts_schema, episodes_schema,
    event_frames_provenance, facts_provenance, episodes_provenance,
]
