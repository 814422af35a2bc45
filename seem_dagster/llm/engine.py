"""What every engine (vLLM offline batch, OpenAI-compatible HTTP) takes and gives back."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class ChatRequest:
    key: str  # the cache key; also how results are matched back to requests
    messages: tuple[dict, ...]  # OpenAI chat format: {"role": ..., "content": ...}
    schema: dict  # the JSON schema the reply must satisfy
    schema_name: str
    max_tokens: int


@dataclass(frozen=True)
class ChatReply:
    key: str
    text: str | None  # None when the call itself failed (transport, HTTP status, timeout)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str | None = None
    attempts: int = 1  # HTTP attempts including retries on 429 / 5xx


class Engine(Protocol):
    backend: str
    model: str

    def complete(self, requests: Sequence[ChatRequest]) -> list[ChatReply]:
        """One reply per request, same order; every request of a run arrives in one call."""


class EngineError(RuntimeError):
    """The engine cannot run at all (missing package, server unreachable): the build stops and says why."""
