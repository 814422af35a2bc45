"""Settings chosen by environment or run config, never by editing code."""

from __future__ import annotations

import os

from dagster import ConfigurableIOManagerFactory, ConfigurableResource
from upath import UPath

from seem_dagster.defs.io_manager import ParquetSnapshotIOManager
from seem_dagster.fusion import FusionConfig
from seem_dagster.ingest import IngestOptions
from seem_dagster.llm.settings import LlmSettings
from seem_dagster.retrieval.search import RetrievalConfig

DEFAULT_STORE = "assets"
DEFAULT_INBOX = "inbox"


def default_store() -> str:
    return os.environ.get("SEEM_STORE", DEFAULT_STORE)


def default_inbox() -> str:
    return os.environ.get("SEEM_INBOX", DEFAULT_INBOX)


class SeemSettings(ConfigurableResource):
    """Where the memory lives and how strictly input is read."""

    store_root: str = DEFAULT_STORE
    inbox: str = DEFAULT_INBOX
    max_turn_chars: int = IngestOptions.max_turn_chars
    allow_empty_turns: bool = IngestOptions.allow_empty_turns

    def root(self) -> UPath:
        return UPath(self.store_root)

    def ingest_options(self) -> IngestOptions:
        return IngestOptions(max_turn_chars=self.max_turn_chars, allow_empty_turns=self.allow_empty_turns)


class SnapshotIOManager(ConfigurableIOManagerFactory):
    """Parquet snapshots under ``store_root`` (a local folder or any fsspec URL)."""

    store_root: str = DEFAULT_STORE

    def create_io_manager(self, context) -> ParquetSnapshotIOManager:
        return ParquetSnapshotIOManager(UPath(self.store_root))


class LlmResource(ConfigurableResource):
    """The language model that extracts frames and facts, answers and judges. Empty fields come from
    SEEM_LLM_BACKEND / _MODEL / _BASE_URL / _RESPONSE_FORMAT / _API_KEY_ENV; with neither, backend
    ``embedded`` (no model: the spaCy extractor). The key itself is only ever read from the
    environment variable ``api_key_env`` names."""

    backend: str = ""
    model: str = ""
    base_url: str = ""
    api_key_env: str = ""
    response_format: str = ""
    max_concurrency: int = LlmSettings.max_concurrency
    timeout_s: float = LlmSettings.timeout_s
    max_retries: int = LlmSettings.max_retries
    max_tokens: int = LlmSettings.max_tokens

    @classmethod
    def from_settings(cls, s: LlmSettings) -> LlmResource:
        return cls(backend=s.backend, model=s.model, base_url=s.base_url, api_key_env=s.api_key_env,
                   response_format=s.response_format, max_concurrency=s.max_concurrency, timeout_s=s.timeout_s,
                   max_retries=s.max_retries, max_tokens=s.max_tokens)

    def settings(self) -> LlmSettings:
        return LlmSettings.from_env(
            backend=self.backend or None, model=self.model or None, base_url=self.base_url or None,
            api_key_env=self.api_key_env or None, response_format=self.response_format or None,
            max_concurrency=self.max_concurrency, timeout_s=self.timeout_s, max_retries=self.max_retries, max_tokens=self.max_tokens,
        )


_FUSION = FusionConfig()
_RETRIEVAL = RetrievalConfig()


class MemorySettings(ConfigurableResource):
    """Which extractor and embedder build the memory, and the fusion judge's thresholds."""

    extractor: str = "embedded"
    embedder: str = "minilm"
    fusion_candidates: int = _FUSION.candidates
    fusion_threshold: float = _FUSION.threshold
    fusion_min_similarity: float = _FUSION.min_similarity
    fusion_adjacency_bonus: float = _FUSION.adjacency_bonus
    fusion_adjacency_turns: int = _FUSION.adjacency_turns
    fusion_participant_bonus: float = _FUSION.participant_bonus
    fusion_time_bonus: float = _FUSION.time_bonus
    fusion_time_window_days: float = _FUSION.time_window_days
    fusion_max_passages: int = _FUSION.max_passages
    synonym_threshold: float = 0.8
    synonym_max_per_node: int = 100
    top_facts: int = _RETRIEVAL.top_facts
    min_fact_score: float = _RETRIEVAL.min_fact_score
    damping: float = _RETRIEVAL.damping
    passage_share: float = _RETRIEVAL.passage_share
    top_passages_rpe: int = _RETRIEVAL.top_passages_rpe
    rpe_max_per_episode: int = _RETRIEVAL.rpe_max_per_episode
    rpe_scope: str = _RETRIEVAL.rpe_scope
    rpe_turn_window: int = _RETRIEVAL.rpe_turn_window
    lexical_weight: float = _RETRIEVAL.lexical_weight
    answer_share: float = _RETRIEVAL.answer_share
    rpe_follow_reply: bool = _RETRIEVAL.rpe_follow_reply
    rpe_name_turns: int = _RETRIEVAL.rpe_name_turns
    rpe_name_links: int = _RETRIEVAL.rpe_name_links
    k: int = 50

    def retrieval_config(self) -> RetrievalConfig:
        return RetrievalConfig(
            top_facts=self.top_facts, min_fact_score=self.min_fact_score, damping=self.damping,
            passage_share=self.passage_share, top_passages_rpe=self.top_passages_rpe,
            rpe_max_per_episode=self.rpe_max_per_episode, rpe_scope=self.rpe_scope, rpe_turn_window=self.rpe_turn_window,
            lexical_weight=self.lexical_weight, answer_share=self.answer_share, rpe_follow_reply=self.rpe_follow_reply,
            rpe_name_turns=self.rpe_name_turns, rpe_name_links=self.rpe_name_links,
        )

    def fusion_config(self) -> FusionConfig:
        return FusionConfig(
            candidates=self.fusion_candidates,
            threshold=self.fusion_threshold,
            min_similarity=self.fusion_min_similarity,
            adjacency_bonus=self.fusion_adjacency_bonus,
            adjacency_turns=self.fusion_adjacency_turns,
            participant_bonus=self.fusion_participant_bonus,
            time_bonus=self.fusion_time_bonus,
            time_window_days=self.fusion_time_window_days,
            max_passages=self.fusion_max_passages,
        )
