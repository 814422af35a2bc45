"""The extraction step over one or more conversations: frames, facts and the model calls table.

The embedded extractor's results are cached per passage by (extractor, version, input). A language
model goes through LlmClient, whose cache is keyed by (backend, model, prompt version, input) and
keeps failures, and every passage of every conversation in the step is sent as one batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from seem_dagster import backends
from seem_dagster.config import LlmConfig, SeemConfig
from seem_dagster.episodic.extraction.interface import Extractor, extract_with_cache, inputs_from_passages, to_tables
from seem_dagster.episodic.extraction.llm import extract_passages
from seem_dagster.llm.client import LlmClient, records_as_rows
from seem_dagster.llm.engines import get_engine
from seem_dagster.llm.prompts import passage
from seem_dagster.pipeline.properties import PropertiesBuilt, build_properties
from seem_dagster.schemas import EventFrames, LlmCalls, table
from seem_dagster.store.cache import ConversationCache


@dataclass
class Extracted:
    frames: pl.DataFrame
    facts: pl.DataFrame
    calls: pl.DataFrame
    extracted: int  # passages that were not in the cache
    extractor: str
    properties: PropertiesBuilt


def extract_conversations(root, tables: dict[str, pl.DataFrame], config: SeemConfig, engine=None) -> dict[str, Extracted]:
    """``tables``: conversation id -> its passages. ``engine`` replaces the configured model's (tests)."""
    extractor = backends.extractor(config.extraction.extractor, config.extraction.parse_processes)
    if config.llm.enabled:
        return _with_llm(root, tables, config.llm, extractor, engine)
    return {cid: _embedded(ConversationCache(root, cid), passages, extractor) for cid, passages in tables.items()}


def cache_name(extractor: Extractor) -> str:
    """The extraction cache an extractor's results are kept in (``ConversationCache.kv``)."""
    return f"{extractor.name}@{extractor.version}"


def _embedded(cache: ConversationCache, passages: pl.DataFrame, extractor: Extractor) -> Extracted:
    name = cache_name(extractor)
    saved = cache.kv("extraction", name)
    inputs = inputs_from_passages(passages)
    run = extract_with_cache(extractor, inputs, saved)
    if run.new_entries:  # only the new results are written: the cache is appended to, as an append's are (memory.increment)
        cache.append_kv("extraction", name, run.new_entries)
    frames, facts = to_tables(inputs, run.results, extractor.name)
    properties = build_properties(cache, facts, passages, name)
    return Extracted(frames, facts, table(LlmCalls, []), run.misses, f"{extractor.name} v{extractor.version}", properties)


def _with_llm(root, tables: dict[str, pl.DataFrame], llm: LlmConfig, fallback: Extractor, engine=None) -> dict[str, Extracted]:
    engine = engine or get_engine(llm)
    caches = {cid: ConversationCache(root, cid) for cid in tables}
    name = f"{llm.backend}@{llm.model}"
    saved = {cid: cache.kv("llm", name) for cid, cache in caches.items()}
    inputs = {cid: inputs_from_passages(t) for cid, t in tables.items()}
    client = LlmClient(engine, {k: v for entries in saved.values() for k, v in entries.items()})
    done = extract_passages(client, [inp for cid in tables for inp in inputs[cid]], fallback, passage.prompt(*llm.reply_bounds))
    extractor = f"llm:{llm.backend}:{llm.model}"
    label = f"{extractor} ({passage.PROMPT.name} prompt v{passage.PROMPT.version})"
    out, offset = {}, 0
    for cid in tables:
        n = len(inputs[cid])
        results, records = done.results[offset:offset + n], done.run.records[offset:offset + n]
        offset += n
        keys = {r.key for r in records}
        mine = {k: v for k, v in done.run.new_entries.items() if k in keys}
        if mine:
            caches[cid].put_kv("llm", name, {**saved[cid], **mine})
        frames, facts = to_tables(inputs[cid], results, extractor)
        rescued = [r.passage_id for r in results if r.passage_id in done.fallback_ids]
        if rescued:
            frames = frames.with_columns(
                pl.when(pl.col(EventFrames.passage_id).is_in(rescued))
                .then(pl.lit(f"{fallback.name} (fallback: {extractor} failed, see llm_calls)"))
                .otherwise(pl.col(EventFrames.extractor)).alias(EventFrames.extractor)
            )
        calls = table(LlmCalls, records_as_rows(records, cid, llm.backend, llm.model))
        # A passage the model answered has the properties it stated; a rescued one, those of its facts.
        stated = {r.passage_id: r.properties for r in results if r.properties is not None}
        properties = build_properties(caches[cid], facts, tables[cid], f"{name}-{passage.PROMPT.name}-v{passage.PROMPT.version}", stated)
        out[cid] = Extracted(frames, facts, calls, sum(1 for r in records if not r.cached), label, properties)
    return out
