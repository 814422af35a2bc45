"""The episodes step: embed the frame summaries (or take their passages' vectors), then fuse them by
the rule judge (continuing from the saved fusion when that gives the same episodes) or by a language
model's judge and merge."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import polars as pl

from seem_dagster import ids
from seem_dagster.config import SeemConfig
from seem_dagster.episodic.fusion import FusionStats
from seem_dagster.episodic.judges import fuse_with_llm
from seem_dagster.episodic.tables import episodes_table, frame_items, fuse_frames
from seem_dagster.llm.client import LlmClient, records_as_rows
from seem_dagster.llm.engines import get_engine
from seem_dagster.pipeline.embedding import cached_embedder, save_vectors
from seem_dagster.retrieval.index import passage_spans, passage_text
from seem_dagster.schemas import EventFrames, LlmCalls, Passages, table
from seem_dagster.store.cache import ConversationCache


@dataclass
class EpisodesBuilt:
    table: pl.DataFrame
    stats: FusionStats
    mode: str  # how fusion ran, for a person: "full: <why>", "incremental: ...", "llm judge: ..."
    embedder: str
    embedding_hits: int
    embedded: int
    embed_seconds: float
    fuse_seconds: float
    llm_calls: pl.DataFrame | None = None  # the judge and merge requests, with a language model


def frame_texts(frames: pl.DataFrame, passages: pl.DataFrame, source: str) -> list[str]:
    """The strings whose vectors fusion compares, in frame order: the summaries, or each frame's passage
    as the retrieval index embeds it (the same string, so the shared cache embeds it once)."""
    if source == "summary":
        return frames[EventFrames.summary].to_list()
    text = {pid: passage_text(speaker, t) for pid, speaker, t in
            passages.select(Passages.passage_id, Passages.speaker, Passages.text).iter_rows()}
    return [text[pid] for pid in frames[EventFrames.passage_id].to_list()]


def build_episodes(cache: ConversationCache, frames: pl.DataFrame, passages: pl.DataFrame, config: SeemConfig,
                   engine=None, facts: pl.DataFrame | None = None) -> EpisodesBuilt:
    """``facts``: with fusion on the passages' vectors, the forward pass that embeds a passage also
    pools its sentences' and facts' vectors for the retrieval index (passage_spans), so no passage runs twice."""
    embedder = cached_embedder(cache, config.extraction.embedder)
    started = time.perf_counter()
    texts = frame_texts(frames, passages, config.fusion.vectors)
    if config.fusion.vectors == "passage" and facts is not None:
        spans = passage_spans(passages, facts, config.extraction.fact_vectors == "pooled")
        vectors, _ = embedder.encode_pooled(texts, [[r for _, _, r in spans.get(p, [])] for p in frames[EventFrames.passage_id].to_list()])
    else:
        vectors = embedder.encode(texts)
    embed_seconds = time.perf_counter() - started
    save_vectors(cache, embedder)
    items = frame_items(frames, passages, vectors)
    started = time.perf_counter()
    calls = None
    if config.llm.enabled:
        name = f"{config.llm.backend}@{config.llm.model}"
        client = LlmClient(engine or get_engine(config.llm), cache.kv("llm-fusion", name))
        result = fuse_with_llm(client, items, config.fusion)
        runs = [r for r in (result.judge_run, result.merge_run) if r is not None]
        if any(r.new_entries for r in runs):
            cache.put_kv("llm-fusion", name, client.cache)
        episodes, stats = episodes_table(result.episodes, result.merged), result.stats
        mode = (f"llm judge: {result.judged_pairs} frame pairs judged, {result.same_event} the same event, "
                f"{result.rule_fallbacks} decided by the rule after a failed call; {len(result.merged)} merged summaries")
        records = [rec for r in runs for rec in r.records]
        calls = table(LlmCalls, records_as_rows(records, cache.conversation_id, config.llm.backend, config.llm.model))
    else:
        # Saved episodes are keyed by the settings that made them, so they are only ever continued
        # with those settings; the frame digests guard against frames that now read differently.
        name = ids.stable_hash("fusion", json.dumps(config.fusion.model_dump(), sort_keys=True), embedder.name)
        saved, saved_digests = cache.table("fusion", name), cache.kv("fusion-frames", name)
        fused = fuse_frames(items, config.fusion, saved, saved_digests)
        episodes, stats, mode = fused.episodes, fused.stats, f"{fused.mode}: {fused.reason}"
        cache.put_table("fusion", name, episodes, stored=saved)
        # After the episodes: a lone new episodes file forces a full fusion.
        cache.put_kv("fusion-frames", name, fused.digests, stored=saved_digests)
    return EpisodesBuilt(episodes, stats, mode, embedder.name, embedder.hits, embedder.misses, embed_seconds,
                         time.perf_counter() - started, calls)
