"""Asset checks: table schemas and pointer integrity, run inside the step that writes the table.

Every check is blocking: a failed one fails its asset's step after the tables are staged, so nothing
downstream runs and the memory is not published (the previous one stays). They run in their asset's
step rather than as steps of their own: a separate check step read its table back from the store and
cost Dagster a step, about 0.1 s each, thirteen of them a build, whatever the build's size.
"""


import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pandera.errors
import polars as pl
from dagster import AssetCheckResult, AssetCheckSeverity, AssetCheckSpec, MetadataValue, PreviewWarning

from seem_dagster.defs.metadata import markdown_table
from seem_dagster.defs.partitions import conversations
from seem_dagster.schemas import (
    Embeddings,
    Entities,
    Episodes,
    EventFrames,
    Facts,
    GraphEdges,
    LlmCalls,
    Passages,
    Properties,
    Questions,
    Retrieved,
)

# Checks are partitioned like their assets, so each result belongs to one conversation; Dagster
# 1.13 marks that as preview. We rely on it knowingly, so the warning is not repeated on every load.
warnings.filterwarnings("ignore", category=PreviewWarning, message="Specifying a partitions_def on an AssetCheckSpec")


# What a check receives: one conversation's table, or {partition: table} when its step covers a
# range (BackfillPolicy.single_run).
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


def _values_as_lengths(cases: pl.DataFrame) -> pl.DataFrame:
    """A failing value of a column (a turn's text, a name) shown as its length: the event log keeps no
    words of the conversations (defs.metadata). A schema-level case (a missing column, a wrong type)
    names the column, which stays."""
    if "failure_case" not in cases.columns or "schema_context" not in cases.columns:
        return cases
    value = pl.col("failure_case")
    return cases.with_columns(pl.when(pl.col("schema_context") == "Column")
                              .then(pl.format("‹{} chars›", value.str.len_chars())).otherwise(value).alias("failure_case"))


def schema_result(model, frame: pl.DataFrame) -> AssetCheckResult:
    try:
        model.validate(frame, lazy=True)
    except pandera.errors.SchemaErrors as err:
        # pandera's polars backend reports its failure cases as a polars frame (pandas is not installed).
        cases = err.failure_cases if isinstance(err.failure_cases, pl.DataFrame) else pl.DataFrame(err.failure_cases)
        return AssetCheckResult(
            passed=False,
            severity=AssetCheckSeverity.ERROR,
            metadata={
                "failures": MetadataValue.int(cases.height),
                "failure_cases": MetadataValue.md(markdown_table(_values_as_lengths(cases.cast(pl.String, strict=False)), rows=20)),
            },
        )
    return AssetCheckResult(passed=True, metadata={"rows": MetadataValue.int(frame.height)})


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


def _schema(model):
    return lambda table: schema_result(model, table)


def _points_to_passages(column: str, *, cover_all: bool = False):
    return lambda table, passages: provenance_result(table[column].to_list(), passages, cover_all=cover_all)


def _episodes_provenance(episodes: pl.DataFrame, passages: pl.DataFrame) -> AssetCheckResult:
    return provenance_result([p for ps in episodes[Episodes.passage_ids].to_list() for p in ps], passages, cover_all=True)


@dataclass(frozen=True)
class Check:
    """One blocking check of ``asset``: ``run`` takes the tables named by ``reads`` (the asset's own first)."""

    name: str
    asset: str
    reads: tuple[str, ...]
    run: Callable[..., AssetCheckResult]
    description: str


CHECKS = (
    Check("passages_schema", "passages", ("passages",), _schema(Passages), "passages match the Passages schema (pandera)"),
    Check("questions_schema", "questions", ("questions",), _schema(Questions), "questions match the Questions schema (pandera)"),
    Check("event_frames_schema", "event_frames", ("event_frames",), _schema(EventFrames), "event_frames match the EventFrames schema (pandera)"),
    Check("event_frames_provenance", "event_frames", ("event_frames", "passages"),
          _points_to_passages(EventFrames.passage_id, cover_all=True),
          "every frame points to an existing passage, and every passage has a frame"),
    Check("facts_schema", "facts", ("facts",), _schema(Facts), "facts match the Facts schema (pandera)"),
    Check("facts_provenance", "facts", ("facts", "passages"), _points_to_passages(Facts.passage_id),
          "every fact points to an existing passage"),
    Check("properties_schema", "properties", ("properties",), _schema(Properties),
          "properties match the Properties schema (pandera): typed values, ordered validity, supersedes resolves"),
    Check("properties_provenance", "properties", ("properties", "passages"), _points_to_passages(Properties.passage_id),
          "every property points to an existing passage"),
    Check("llm_calls_schema", "llm_calls", ("llm_calls",), _schema(LlmCalls), "llm_calls match the LlmCalls schema (pandera)"),
    Check("episodes_schema", "episodes", ("episodes",), _schema(Episodes), "episodes match the Episodes schema (pandera)"),
    Check("episodes_provenance", "episodes", ("episodes", "passages"), _episodes_provenance,
          "every episode pointer resolves, and every passage is in an episode (fusion never loses a turn)"),
    Check("entities_schema", "entities", ("entities",), _schema(Entities), "entities match the Entities schema (pandera)"),
    Check("graph_edges_integrity", "graph_edges", ("graph_edges", "passages", "entities"), _graph_edges_integrity,
          "graph_edges match the schema and every edge joins existing passage or entity nodes"),
    Check("retrieval_index_schema", "retrieval_index", ("retrieval_index",), _schema(Embeddings),
          "retrieval_index matches the Embeddings schema (pandera)"),
    Check("retrieved_context_schema", "retrieved_context", ("retrieved_context",), _schema(Retrieved),
          "retrieved_context matches the Retrieved schema (pandera)"),
)


def check_specs(*assets: str) -> list[AssetCheckSpec]:
    """The specs of the checks on ``assets``, for the decorator of the asset (or multi-asset) writing them."""
    return [AssetCheckSpec(c.name, asset=c.asset, blocking=True, description=c.description, partitions_def=conversations)
            for c in CHECKS if c.asset in assets]


def run_checks(written: dict[str, Tables], **inputs: Tables) -> Iterator[AssetCheckResult]:
    """The results of every check on the tables a step ``written`` (name -> table, or {partition: table}
    when the step covers a range); ``inputs`` are the step's inputs that checks also read (passages).
    Each result carries the seconds it took: the cost of checking stays visible inside the step."""
    tables = {**inputs, **written}
    for check in CHECKS:
        if check.asset not in written:
            continue
        started = time.perf_counter()
        result = per_partition(check.run, *(tables[name] for name in check.reads))
        yield AssetCheckResult(
            asset_key=check.asset, check_name=check.name, passed=result.passed, severity=result.severity,
            metadata={**result.metadata, "seconds": MetadataValue.float(round(time.perf_counter() - started, 4))},
        )
