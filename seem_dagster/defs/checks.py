"""Asset checks: table schemas (blocking: nothing downstream runs on a bad table) and pointer integrity."""


import warnings
from typing import Any

import pandera.errors
import polars as pl
from dagster import AssetCheckResult, AssetCheckSeverity, AssetIn, MetadataValue, PreviewWarning, asset_check

from seem_dagster.defs.metadata import markdown_table
from seem_dagster.defs.partitions import conversations
from seem_dagster.schemas import Entities, Episodes, EventFrames, Facts, GraphEdges, LlmCalls, Passages, Properties, Questions

# Checks must be partitioned like their assets (unpartitioned ones load every partition); Dagster
# 1.13 marks that as preview. We rely on it knowingly, so the warning is not repeated on every load.
warnings.filterwarnings("ignore", category=PreviewWarning, message="Specifying a partitions_def on an AssetCheckSpec")


# What a check receives: one conversation's table, or {partition: table} when its step covers a
# range (BackfillPolicy.single_run). Not annotated as a DataFrame: Dagster would type-check the dict.
Tables = Any


def per_partition(check, *tables) -> AssetCheckResult:
    """``check`` of one conversation's tables, or of each conversation's when a step covers a range
    (BackfillPolicy.single_run hands the check {partition: table}); passed only if every one did."""
    if not isinstance(tables[0], dict):
        return check(*tables)
    results = {key: check(*(t[key] for t in tables)) for key in tables[0]}
    failed = [key for key, r in results.items() if not r.passed]
    shown = results[failed[0]] if failed else next(iter(results.values()))
    return AssetCheckResult(
        passed=not failed, severity=shown.severity,
        metadata={**shown.metadata, "partitions": MetadataValue.int(len(results)),
                  "failed_partitions": MetadataValue.text(", ".join(failed) or "none")},
    )


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
def passages_schema(passages: Tables) -> AssetCheckResult:
    return per_partition(lambda t: schema_result(Passages, t), passages)


@asset_check(partitions_def=conversations, asset="questions", blocking=True, description="questions match the Questions schema (pandera)")
def questions_schema(questions: Tables) -> AssetCheckResult:
    return per_partition(lambda t: schema_result(Questions, t), questions)


@asset_check(partitions_def=conversations, asset="llm_calls", blocking=True, description="llm_calls match the LlmCalls schema (pandera)")
def llm_calls_schema(llm_calls: Tables) -> AssetCheckResult:
    return per_partition(lambda t: schema_result(LlmCalls, t), llm_calls)


@asset_check(partitions_def=conversations, asset="event_frames", blocking=True, description="event_frames match the EventFrames schema (pandera)")
def event_frames_schema(event_frames: Tables) -> AssetCheckResult:
    return per_partition(lambda t: schema_result(EventFrames, t), event_frames)


@asset_check(partitions_def=conversations, asset="facts", blocking=True, description="facts match the Facts schema (pandera)")
def facts_schema(facts: Tables) -> AssetCheckResult:
    return per_partition(lambda t: schema_result(Facts, t), facts)


@asset_check(partitions_def=conversations, asset="episodes", blocking=True, description="episodes match the Episodes schema (pandera)")
def episodes_schema(episodes: Tables) -> AssetCheckResult:
    return per_partition(lambda t: schema_result(Episodes, t), episodes)


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
def event_frames_provenance(event_frames: Tables, passages: Tables) -> AssetCheckResult:
    return per_partition(lambda f, p: provenance_result(f[EventFrames.passage_id].to_list(), p, cover_all=True), event_frames, passages)


@asset_check(
    partitions_def=conversations,
    asset="facts", blocking=True, additional_ins={"passages": AssetIn("passages")},
    description="every fact points to an existing passage",
)
def facts_provenance(facts: Tables, passages: Tables) -> AssetCheckResult:
    return per_partition(lambda f, p: provenance_result(f[Facts.passage_id].to_list(), p), facts, passages)


@asset_check(
    partitions_def=conversations,
    asset="episodes", blocking=True, additional_ins={"passages": AssetIn("passages")},
    description="every episode pointer resolves, and every passage is in an episode (fusion never loses a turn)",
)
def episodes_provenance(episodes: Tables, passages: Tables) -> AssetCheckResult:
    def one(episodes, passages):
        return provenance_result([p for ps in episodes[Episodes.passage_ids].to_list() for p in ps], passages, cover_all=True)

    return per_partition(one, episodes, passages)


@asset_check(partitions_def=conversations, asset="properties", blocking=True,
             description="properties match the Properties schema (pandera): typed values, ordered validity, supersedes resolves")
def properties_schema(properties: Tables) -> AssetCheckResult:
    return per_partition(lambda t: schema_result(Properties, t), properties)


@asset_check(
    partitions_def=conversations,
    asset="properties", blocking=True, additional_ins={"passages": AssetIn("passages")},
    description="every property points to an existing passage",
)
def properties_provenance(properties: Tables, passages: Tables) -> AssetCheckResult:
    return per_partition(lambda f, p: provenance_result(f[Properties.passage_id].to_list(), p), properties, passages)


@asset_check(partitions_def=conversations, asset="entities", blocking=True, description="entities match the Entities schema (pandera)")
def entities_schema(entities: Tables) -> AssetCheckResult:
    return per_partition(lambda t: schema_result(Entities, t), entities)


@asset_check(
    partitions_def=conversations,
    asset="graph_edges", blocking=True,
    additional_ins={"passages": AssetIn("passages"), "entities": AssetIn("entities")},
    description="graph_edges match the schema and every edge joins existing passage or entity nodes",
)
def graph_edges_integrity(graph_edges: Tables, passages: Tables, entities: Tables) -> AssetCheckResult:
    return per_partition(_graph_edges_integrity, graph_edges, passages, entities)


def _graph_edges_integrity(graph_edges: pl.DataFrame, passages: pl.DataFrame, entities: pl.DataFrame) -> AssetCheckResult:
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
    event_frames_provenance, facts_provenance, episodes_provenance, properties_schema, properties_provenance,
]
