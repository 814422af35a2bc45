"""event_frames, facts and episodes: SEEM's episodic layer, one conversation per partition."""

import time

import polars as pl
from dagster import (
    AssetExecutionContext,
    AssetIn,
    AssetOut,
    BackfillPolicy,
    MetadataValue,
    Output,
    ResourceParam,
    asset,
    multi_asset,
)

from seem_dagster.config import SeemConfig
from seem_dagster.defs.checks import check_specs, run_checks
from seem_dagster.defs.metadata import markdown_table, table_metadata
from seem_dagster.defs.partitions import conversations
from seem_dagster.pipeline.episodes import build_episodes
from seem_dagster.pipeline.extract import extract_conversations
from seem_dagster.schemas import Episodes, EventFrames, Facts, LlmCalls, Passages, Properties
from seem_dagster.store.cache import ConversationCache

GROUP = "episodic"
KINDS = {"parquet", "polars"}


LLM_POOL = "llm"


@multi_asset(
    partitions_def=conversations,
    ins={"passages": AssetIn()},
    outs={
        "event_frames": AssetOut(
            description="One event frame per passage: a summary and its events (participants, action, time, "
            "location, cause, manner), times resolved to ISO dates against the session date.",
            group_name=GROUP, kinds=KINDS | {"spacy"}, io_manager_key="snapshot_io_manager",
        ),
        "facts": AssetOut(
            description="Time-stamped quadruples (subject, relation, object, time) from each passage, "
            "the speaker as the subject of 'I'. The graph layer builds on them.",
            group_name=GROUP, kinds=KINDS | {"spacy"}, io_manager_key="snapshot_io_manager",
        ),
        "properties": AssetOut(
            description="Entity -> property -> typed value (string, date, number, boolean) with the time it holds from, "
            "the time it was said and the passage it came from. A later value of a single-valued property (where "
            "someone lives, a job, a count) supersedes the earlier: both rows stay, the earlier gets valid_to. "
            "Multi-valued properties accumulate. Derived from the facts, or stated by the language model.",
            group_name=GROUP, kinds=KINDS, io_manager_key="snapshot_io_manager",
        ),
        "llm_calls": AssetOut(
            description="Every language-model request of the extraction: prompt, passage, calls, tokens, and "
            "status (ok, failed after the repair retry with the raw output and reason, unanswered). Empty "
            "with the embedded extractor.",
            group_name=GROUP, kinds=KINDS, io_manager_key="snapshot_io_manager",
        ),
    },
    # Model steps share a pool (limit it in dagster.yaml: concurrency.pools), and a backfill of many
    # conversations runs as one step, so vLLM gets every passage of the range in one batch.
    pool=LLM_POOL,
    backfill_policy=BackfillPolicy.single_run(),
    check_specs=check_specs("event_frames", "facts", "properties", "llm_calls"),
)
def extract_frames(context: AssetExecutionContext, passages, seem: ResourceParam[SeemConfig]):
    keys = list(context.partition_keys)
    tables = passages if isinstance(passages, dict) else {keys[0]: passages}
    started = time.perf_counter()
    built = extract_conversations(seem.store.root, tables, seem)
    seconds = time.perf_counter() - started
    frames = {k: b.frames for k, b in built.items()}
    facts = {k: b.facts for k, b in built.items()}
    calls = {k: b.calls for k, b in built.items()}
    all_frames, all_facts, all_calls = (pl.concat(list(t.values())) for t in (frames, facts, calls))
    extracted = sum(b.extracted for b in built.values())
    events = all_frames[EventFrames.events].list.len()
    failed = all_calls.filter(pl.col(LlmCalls.status) != "ok")
    one = len(keys) == 1

    def value(per_partition: dict):
        return per_partition[keys[0]] if one else per_partition

    yield Output(
        value(frames),
        output_name="event_frames",
        metadata={
            **table_metadata(all_frames, [EventFrames.passage_id, EventFrames.summary], text=[EventFrames.summary]),
            "extractor": MetadataValue.text(built[keys[0]].extractor),
            "partitions_in_this_step": MetadataValue.int(len(keys)),
            "cache_hits": MetadataValue.int(all_frames.height - extracted),
            "extracted": MetadataValue.int(extracted),
            "seconds": MetadataValue.float(round(seconds, 2)),
            "passages_per_second": MetadataValue.float(round(extracted / seconds, 1) if extracted and seconds else 0.0),
            "events": MetadataValue.int(int(events.sum() or 0)),
            "frames_without_events": MetadataValue.int(int((events == 0).sum())),
            "llm_failures": MetadataValue.int(failed.height),
        },
    )
    yield Output(
        value(facts),
        output_name="facts",
        metadata={
            **table_metadata(all_facts, [Facts.passage_id, Facts.subject, Facts.relation, Facts.object, Facts.time, Facts.time_text],
                              text=[Facts.subject, Facts.relation, Facts.object, Facts.time_text]),
            "with_time": MetadataValue.int(all_facts.filter(pl.col(Facts.time).is_not_null()).height),
        },
    )
    properties = {k: b.properties.table for k, b in built.items()}
    yield _properties_output(properties, [b.properties.history for b in built.values()], value)
    prompt_tokens, completion_tokens = int(all_calls[LlmCalls.prompt_tokens].sum() or 0), int(all_calls[LlmCalls.completion_tokens].sum() or 0)
    fresh = all_calls.filter(~pl.col(LlmCalls.cached)).height
    yield Output(
        value(calls),
        output_name="llm_calls",
        metadata={
            **table_metadata(all_calls, [LlmCalls.item_id, LlmCalls.prompt, LlmCalls.status, LlmCalls.calls, LlmCalls.prompt_tokens,
                                         LlmCalls.completion_tokens]),
            "llm": MetadataValue.json(seem.llm.describe()),
            "model_calls": MetadataValue.int(int(all_calls[LlmCalls.calls].sum() or 0)),
            "cached_results": MetadataValue.int(all_calls.filter(pl.col(LlmCalls.cached)).height),
            "failed": MetadataValue.int(failed.filter(pl.col(LlmCalls.status) == "failed").height),
            "unanswered": MetadataValue.int(failed.filter(pl.col(LlmCalls.status) == "unanswered").height),
            "prompt_tokens": MetadataValue.int(prompt_tokens),
            "completion_tokens": MetadataValue.int(completion_tokens),
            "tokens_per_passage": MetadataValue.float(round((prompt_tokens + completion_tokens) / fresh, 1) if fresh else 0.0),
            "failures": MetadataValue.md(
                markdown_table(failed, [LlmCalls.item_id, LlmCalls.status, LlmCalls.error, LlmCalls.raw], rows=20, width=200,
                               text=[LlmCalls.error, LlmCalls.raw])
                if failed.height else "no failures"
            ),
        },
    )
    yield from run_checks({"event_frames": value(frames), "facts": value(facts), "properties": value(properties),
                           "llm_calls": value(calls)}, passages=passages)


def _properties_output(tables: dict, history: list, value) -> Output:
    everything = pl.concat(list(tables.values()))
    return Output(
        value(tables),
        output_name="properties",
        metadata={
            **table_metadata(everything, [Properties.entity, Properties.property, Properties.value, Properties.dtype,
                                          Properties.valid_from, Properties.valid_to], text=[Properties.entity, Properties.value]),
            "single_valued_rows": MetadataValue.int(everything.filter(pl.col(Properties.single_valued)).height),
            "superseded_rows": MetadataValue.int(everything.filter(pl.col(Properties.valid_to).is_not_null()).height),
            "by_dtype": MetadataValue.json(dict(everything.group_by(Properties.dtype).len().sort(Properties.dtype).iter_rows())),
            # Against the last build with the same settings: rows are content-addressed, so a new
            # session appends rows and closes superseded ones; withdrawn > 0 means the input changed.
            "appended": MetadataValue.int(sum(h.appended for h in history)),
            "closed": MetadataValue.int(sum(h.closed for h in history)),
            "kept": MetadataValue.int(sum(h.kept for h in history)),
            "withdrawn": MetadataValue.int(sum(h.withdrawn for h in history)),
        },
    )


@asset(
    partitions_def=conversations,
    ins={"event_frames": AssetIn(), "passages": AssetIn(), "facts": AssetIn()},
    group_name=GROUP,
    pool=LLM_POOL,
    kinds=KINDS | {"pytorch"},
    io_manager_key="snapshot_io_manager",
    check_specs=check_specs("episodes"),
    description="Episodes: frames fused by the associative judge (summary embeddings, shared participants, "
    "time) or, with a language model, by its same-event judge and merge prompts; each points to every "
    "passage of one event across sessions.",
)
def episodes(context: AssetExecutionContext, event_frames: pl.DataFrame, passages: pl.DataFrame, facts: pl.DataFrame,
             seem: ResourceParam[SeemConfig]):
    built = build_episodes(ConversationCache(seem.store.root, context.partition_key), event_frames, passages, seem, facts=facts)
    table, stats = built.table, built.stats
    sizes = table[Episodes.passage_ids].list.len()
    session_of = dict(zip(passages[Passages.passage_id].to_list(), passages[Passages.session_index].to_list()))
    cross = [len({session_of[p] for p in pids}) > 1 for pids in table[Episodes.passage_ids].to_list()]
    sample = _sample_markdown(table, passages, cross)
    yield Output(
        table,
        metadata={
            **table_metadata(table, [Episodes.episode_id, Episodes.summary, Episodes.first_time, Episodes.last_time], text=[Episodes.summary]),
            "frames": MetadataValue.int(event_frames.height),
            # Of the memory, not of this run (an incremental run fuses only the new frames): each frame
            # either starts an episode or joins one.
            "fusion_rate": MetadataValue.float(round(1 - table.height / event_frames.height, 3) if event_frames.height else 0.0),
            "frames_fused_this_run": MetadataValue.int(stats.frames),
            "passages_per_episode_mean": MetadataValue.float(round(float(sizes.mean() or 0), 2)),
            "passages_per_episode_max": MetadataValue.int(int(sizes.max() or 0)),
            "cross_session_episodes": MetadataValue.int(sum(cross)),
            "fusion_mode": MetadataValue.text(built.mode),
            "fusion_config": MetadataValue.json(seem.fusion.model_dump()),
            "embedder": MetadataValue.text(built.embedder),
            "embedding_cache_hits": MetadataValue.int(built.embedding_hits),
            "embedded": MetadataValue.int(built.embedded),
            "embed_seconds": MetadataValue.float(round(built.embed_seconds, 2)),
            "fuse_seconds": MetadataValue.float(round(built.fuse_seconds, 3)),
            "sample_episode": MetadataValue.md(sample),
            **(_llm_fusion_metadata(built.llm_calls) if built.llm_calls is not None else {}),
        },
    )
    yield from run_checks({"episodes": table}, passages=passages)


def _llm_fusion_metadata(calls: pl.DataFrame) -> dict:
    failed = calls.filter(pl.col(LlmCalls.status) != "ok")
    return {
        "fusion_model_calls": MetadataValue.int(int(calls[LlmCalls.calls].sum() or 0)),
        "fusion_cached_results": MetadataValue.int(calls.filter(pl.col(LlmCalls.cached)).height),
        "fusion_prompt_tokens": MetadataValue.int(int(calls[LlmCalls.prompt_tokens].sum() or 0)),
        "fusion_completion_tokens": MetadataValue.int(int(calls[LlmCalls.completion_tokens].sum() or 0)),
        "fusion_failures": MetadataValue.int(failed.height),
        "fusion_failures_table": MetadataValue.md(
            markdown_table(failed, [LlmCalls.item_id, LlmCalls.prompt, LlmCalls.status, LlmCalls.error, LlmCalls.raw], rows=20, width=160,
                           text=[LlmCalls.error, LlmCalls.raw])
            if failed.height else "no failures"
        ),
    }


def _sample_markdown(table: pl.DataFrame, passages: pl.DataFrame, cross: list[bool]) -> str:
    """The largest cross-session episode (else the largest), with all of its turns' refs, dates and speakers
    (its summary and the turns' words as lengths: see ``defs.metadata``)."""
    if table.height == 0:
        return "no episodes"
    order = sorted(range(table.height), key=lambda i: (not cross[i], -len(table[Episodes.passage_ids][i])))
    row = table.row(order[0], named=True)
    turns = passages.filter(pl.col(Passages.passage_id).is_in(row[Episodes.passage_ids])).sort(
        Passages.session_index, Passages.turn_index
    )
    return f"**{row[Episodes.episode_id]}** ({len(row[Episodes.summary])}-character summary)\n\n" + markdown_table(
        turns, [Passages.source_ref, Passages.timestamp, Passages.speaker, Passages.text], rows=30, width=160, text=[Passages.text]
    )
