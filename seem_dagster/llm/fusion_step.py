"""The episodes step with a language model: judge and merge through the cached client, episodes table out."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from seem_dagster.episodic import episodes_table
from seem_dagster.fusion import FusionConfig
from seem_dagster.llm.client import LlmClient, records_as_rows
from seem_dagster.llm.engines import get_engine
from seem_dagster.llm.fusion import LlmFusion, fuse_with_llm
from seem_dagster.llm.settings import LlmSettings
from seem_dagster.schemas import LlmCalls, table
from seem_dagster.store.cache import cache_path, read_kv, write_kv

@dataclass
class LlmFused:
    table: pl.DataFrame
    result: LlmFusion
    settings: LlmSettings
    conversation_id: str

    def calls(self) -> pl.DataFrame:
        """The judge and merge requests as LlmCalls rows (item_id: frame pair or episode id)."""
        records = [rec for r in (self.result.judge_run, self.result.merge_run) if r is not None for rec in r.records]
        return table(LlmCalls, records_as_rows(records, self.conversation_id, self.settings.backend, self.settings.model))


def fuse_frames_with_llm(root, conversation_id: str, items, config: FusionConfig, settings: LlmSettings, engine=None) -> LlmFused:
    """Judge and merge with the model; replies cached per conversation, so a rebuild makes no calls
    and new frames pay only for their own candidate pairs."""
    path = cache_path(root, "llm-fusion", f"{settings.backend}@{settings.model}", conversation_id)
    client = LlmClient(engine or get_engine(settings), read_kv(path))
    result = fuse_with_llm(client, items, config)
    if any(r is not None and r.new_entries for r in (result.judge_run, result.merge_run)):
        write_kv(path, client.cache)
    return LlmFused(episodes_table(result.episodes, result.merged), result, settings, conversation_id)
