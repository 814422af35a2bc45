"""One extraction step over one or more conversations: caches in the store, then frames, facts, calls.

The embedded extractor caches per passage by (extractor, version, input). A language model goes
through LlmClient, whose cache is keyed by (backend, model, prompt version, input) and keeps
failures, and every passage of every conversation in the step is sent as one batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from seem_dagster.extraction.interface import Extractor, extract_with_cache, inputs_from_passages, to_tables
from seem_dagster.llm.client import LlmClient, records_as_rows
from seem_dagster.llm.engines import get_engine
from seem_dagster.llm.extract import extract_passages
from seem_dagster.llm.prompts import passage
from seem_dagster.llm.settings import LlmSettings
from seem_dagster.schemas import EventFrames, LlmCalls, table
from seem_dagster.store.cache import cache_path, read_kv, write_kv


@dataclass
class Extracted:
    frames: pl.DataFrame
    facts: pl.DataFrame
    calls: pl.DataFrame
    extracted: int  # passages that were not in the cache
    extractor: str


def extract_embedded(root, conversation_id: str, passages: pl.DataFrame, extractor: Extractor) -> Extracted:
    path = cache_path(root, "extraction", f"{extractor.name}@{extractor.version}", conversation_id)
    cache = read_kv(path)
    inputs = inputs_from_passages(passages)
    run = extract_with_cache(extractor, inputs, cache)
    if run.new_entries:
        write_kv(path, {**cache, **run.new_entries})
    frames, facts = to_tables(inputs, run.results, extractor.name)
    return Extracted(frames, facts, table(LlmCalls, []), run.misses, f"{extractor.name} v{extractor.version}")


def extract_with_llm(root, tables: dict[str, pl.DataFrame], settings: LlmSettings, fallback: Extractor, engine=None) -> dict[str, Extracted]:
    engine = engine or get_engine(settings)
    paths = {cid: cache_path(root, "llm", f"{settings.backend}@{settings.model}", cid) for cid in tables}
    saved = {cid: read_kv(path) for cid, path in paths.items()}
    cache = {k: v for entries in saved.values() for k, v in entries.items()}
    inputs = {cid: inputs_from_passages(t) for cid, t in tables.items()}
    everything = [inp for cid in tables for inp in inputs[cid]]
    client = LlmClient(engine, cache)
    done = extract_passages(client, everything, fallback)
    name = f"llm:{settings.backend}:{settings.model}"
    label = f"{name} ({passage.PROMPT.name} prompt v{passage.PROMPT.version})"
    out, offset = {}, 0
    for cid in tables:
        n = len(inputs[cid])
        results, records = done.results[offset:offset + n], done.run.records[offset:offset + n]
        offset += n
        keys = {r.key for r in records}
        mine = {k: v for k, v in done.run.new_entries.items() if k in keys}
        if mine:
            write_kv(paths[cid], {**saved[cid], **mine})
        frames, facts = to_tables(inputs[cid], results, name)
        rescued = [r.passage_id for r in results if r.passage_id in done.fallback_ids]
        if rescued:
            frames = frames.with_columns(
                pl.when(pl.col(EventFrames.passage_id).is_in(rescued))
                .then(pl.lit(f"{fallback.name} (fallback: {name} failed, see llm_calls)"))
                .otherwise(pl.col(EventFrames.extractor)).alias(EventFrames.extractor)
            )
        calls = table(LlmCalls, records_as_rows(records, cid, settings.backend, settings.model))
        out[cid] = Extracted(frames, facts, calls, sum(1 for r in records if not r.cached), label)
    return out

