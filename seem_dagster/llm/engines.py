"""Settings -> an engine, built once per process (a vLLM model takes minutes to load)."""

from __future__ import annotations

from functools import lru_cache

from seem_dagster.config import LlmConfig
from seem_dagster.llm.engine import Engine


@lru_cache(maxsize=4)
def get_engine(settings: LlmConfig) -> Engine:
    if settings.backend == "openai":
        from seem_dagster.llm.http import OpenAICompatibleEngine

        return OpenAICompatibleEngine(settings)
    if settings.backend == "vllm":
        from seem_dagster.llm.vllm_batch import VllmEngine

        return VllmEngine(settings)
    raise ValueError(f"backend {settings.backend!r} has no language model")
