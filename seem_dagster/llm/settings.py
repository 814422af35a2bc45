"""Which model answers and how to reach it: one value object for the CLI, Dagster and notebooks."""

from __future__ import annotations

import os
from dataclasses import dataclass

BACKENDS = ("embedded", "openai", "vllm")
RESPONSE_FORMATS = ("json_schema", "json_object")
DEFAULT_API_KEY_ENV = "SEEM_LLM_API_KEY"


@dataclass(frozen=True)
class LlmSettings:
    """``embedded`` means no language model: the spaCy extractor builds the memory.

    ``response_format`` chooses how the schema reaches an HTTP server: ``json_schema`` (OpenAI,
    ``vllm serve``) or ``json_object`` with the schema inside it (llama.cpp's server, which answers
    500 to json_schema). The API key is read from the environment variable named by
    ``api_key_env`` at call time and never stored here, so it cannot reach logs or metadata.
    """

    backend: str = "embedded"
    model: str = ""
    base_url: str = ""
    api_key_env: str = DEFAULT_API_KEY_ENV
    response_format: str = "json_schema"
    max_concurrency: int = 8
    timeout_s: float = 120.0
    max_retries: int = 4
    backoff_s: float = 1.0
    max_tokens: int = 768
    temperature: float = 0.0
    # vLLM offline batch only
    tensor_parallel_size: int = 1
    max_model_len: int = 8192

    def __post_init__(self):
        if self.backend not in BACKENDS:
            raise ValueError(f"LLM backend {self.backend!r}: choose from {', '.join(BACKENDS)}")
        if self.response_format not in RESPONSE_FORMATS:
            raise ValueError(f"response_format {self.response_format!r}: choose from {', '.join(RESPONSE_FORMATS)}")
        if self.backend != "embedded" and not self.model:
            raise ValueError(f"LLM backend {self.backend!r} needs a model name (--model / SEEM_LLM_MODEL)")
        if self.backend == "openai" and not self.base_url:
            raise ValueError("LLM backend 'openai' needs a base URL (--base-url / SEEM_LLM_BASE_URL), e.g. http://127.0.0.1:8000/v1")
        if self.max_concurrency < 1 or self.max_retries < 0 or self.timeout_s <= 0:
            raise ValueError("max_concurrency >= 1, max_retries >= 0 and timeout_s > 0 are required")

    @property
    def enabled(self) -> bool:
        return self.backend != "embedded"

    def api_key(self) -> str | None:
        return os.environ.get(self.api_key_env) or None

    def describe(self) -> dict:
        """What may be shown (metadata, logs): everything but the key, which is only named."""
        return {"backend": self.backend, "model": self.model, "base_url": self.base_url, "response_format": self.response_format,
                "api_key_env": self.api_key_env, "api_key_set": self.api_key() is not None, "max_tokens": self.max_tokens}

    @classmethod
    def from_env(cls, **overrides) -> LlmSettings:
        """SEEM_LLM_BACKEND, SEEM_LLM_MODEL, SEEM_LLM_BASE_URL, SEEM_LLM_RESPONSE_FORMAT, SEEM_LLM_API_KEY_ENV;
        explicit overrides (CLI flags, Dagster config) win over the environment."""
        env = {
            "backend": os.environ.get("SEEM_LLM_BACKEND"),
            "model": os.environ.get("SEEM_LLM_MODEL"),
            "base_url": os.environ.get("SEEM_LLM_BASE_URL"),
            "response_format": os.environ.get("SEEM_LLM_RESPONSE_FORMAT"),
            "api_key_env": os.environ.get("SEEM_LLM_API_KEY_ENV"),
        }
        values = {k: v for k, v in env.items() if v}
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)
