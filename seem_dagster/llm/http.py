"""OpenAI-compatible chat completions over HTTP (vllm serve, llama.cpp's server, hosted APIs).

Async with bounded concurrency; timeouts; retries with exponential back-off on 429 and 5xx
(honouring Retry-After) and on connection errors. The API key goes into the Authorization header
only. A server may echo it back (an error body quoting the key it refused, a reply repeating the
header): every error and reply text is redacted (``redact``) before it leaves this module, so it
cannot reach the llm_calls table, the cache, a log line or Dagster's event log. A 401 or 403 stops
the run (``EngineError``): every other call would be refused too.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import re
from collections.abc import Sequence

import httpx

from seem_dagster.config import LlmConfig
from seem_dagster.llm.engine import ChatReply, ChatRequest, EngineError

RETRY_STATUS = {429, 500, 502, 503, 504}
AUTH_STATUS = {401, 403}
MAX_BACKOFF_S = 30.0
REDACTED = "[REDACTED]"
# An Authorization header or a bearer token quoted in text: the value after it is a secret.
_AUTH_VALUE = re.compile(r"(?i)(authorization[\"']?\s*[:=]\s*[\"']?(?:(?:bearer|basic|token)\s+)?+|bearer\s+)(?!\[REDACTED\])([^\s\"',;}\]]+)")


def redact(text: str | None, secrets: Sequence[str | None] = ()) -> str | None:
    """``text`` without the secrets it contains nor any Authorization header value."""
    if not text:
        return text
    for secret in secrets:
        if secret:
            text = text.replace(secret, REDACTED)
    return _AUTH_VALUE.sub(lambda m: m.group(1) + REDACTED, text)


def response_format(mode: str, request: ChatRequest) -> dict:
    if mode == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": request.schema_name, "schema": request.schema, "strict": True}}
    return {"type": "json_object", "schema": request.schema}


class OpenAICompatibleEngine:
    backend = "openai"

    def __init__(self, settings: LlmConfig, transport: httpx.AsyncBaseTransport | None = None):
        self.settings = settings
        self.model = settings.model
        self.url = settings.base_url.rstrip("/") + "/chat/completions"
        self._transport = transport

    def __repr__(self) -> str:  # never the key
        return f"OpenAICompatibleEngine(url={self.url!r}, model={self.model!r}, response_format={self.settings.response_format!r})"

    def complete(self, requests: Sequence[ChatRequest]) -> list[ChatReply]:
        if not requests:
            return []
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            replies = asyncio.run(self._all(requests))
        else:  # called from a running loop (a notebook): run ours in a worker thread
            with concurrent.futures.ThreadPoolExecutor(1) as pool:
                replies = pool.submit(asyncio.run, self._all(requests)).result()
        refused = [r for r in replies if r.error and r.error.startswith(tuple(f"HTTP {s}" for s in AUTH_STATUS))]
        if refused:
            raise EngineError(f"{self.url} refused the credentials ({refused[0].error}); check the key in "
                              f"${self.settings.api_key_env} (set: {'yes' if self.settings.api_key() else 'no'})")
        if all(r.text is None for r in replies) and all((r.error or "").startswith("connection") for r in replies):
            raise EngineError(f"no reply from {self.url}: {replies[0].error}")
        return replies

    async def _all(self, requests: Sequence[ChatRequest]) -> list[ChatReply]:
        limit = asyncio.Semaphore(self.settings.max_concurrency)
        async with httpx.AsyncClient(headers=client_headers(self.settings), timeout=client_timeout(self.settings),
                                     transport=self._transport) as client:
            return list(await asyncio.gather(*(self._one(client, limit, r) for r in requests)))

    async def _one(self, client: httpx.AsyncClient, limit: asyncio.Semaphore, request: ChatRequest) -> ChatReply:
        reply = await self._attempts(client, limit, request)
        secrets = (self.settings.api_key(),)
        return dataclasses.replace(reply, text=redact(reply.text, secrets), error=redact(reply.error, secrets))

    async def _attempts(self, client: httpx.AsyncClient, limit: asyncio.Semaphore, request: ChatRequest) -> ChatReply:
        body = {
            "model": self.model,
            "messages": list(request.messages),
            "temperature": self.settings.temperature,
            "max_tokens": request.max_tokens,
            "response_format": response_format(self.settings.response_format, request),
        }
        response, error, attempts = await post_with_retries(client, limit, self.url, body, self.settings)
        if response is None:
            return ChatReply(request.key, None, error=error, attempts=attempts)
        return self._reply(request, response, attempts)

    def _reply(self, request: ChatRequest, response: httpx.Response, attempts: int) -> ChatReply:
        try:
            data = response.json()
            text = data["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError) as err:
            return ChatReply(request.key, None, error=f"malformed response ({type(err).__name__}): {response.text[:300]}", attempts=attempts)
        usage = data.get("usage") or {}
        return ChatReply(request.key, text, int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0), attempts=attempts)


async def post_with_retries(client: httpx.AsyncClient, limit: asyncio.Semaphore, url: str, body: dict,
                            settings: LlmConfig) -> tuple[httpx.Response | None, str | None, int]:
    """(the 200 response, None, attempts) or (None, why not, attempts): retries 429, 5xx, timeouts and
    connection errors with exponential back-off (honouring Retry-After); other statuses fail at once."""
    error = "no attempt"
    attempts = 0
    for attempt in range(settings.max_retries + 1):
        attempts = attempt + 1
        wait = settings.backoff_s * 2**attempt
        async with limit:
            try:
                response = await client.post(url, json=body)
            except httpx.TimeoutException as err:
                error = f"timeout after {settings.timeout_s:g} s ({type(err).__name__})"
                response = None
            except httpx.TransportError as err:
                error = f"connection failed: {type(err).__name__}: {err}"
                response = None
        if response is not None:
            if response.status_code == 200:
                return response, None, attempts
            # A server may echo the key in its error body: it never leaves here unredacted.
            error = redact(f"HTTP {response.status_code}: {response.text[:300]}", [settings.api_key()])
            if response.status_code not in RETRY_STATUS:
                return None, error, attempts
            retry_after = response.headers.get("retry-after")
            if retry_after and retry_after.replace(".", "", 1).isdigit():
                wait = float(retry_after)
        if attempt < settings.max_retries:
            await asyncio.sleep(min(wait, MAX_BACKOFF_S))
    return None, f"{error} (after {attempts} attempts)", attempts


def client_headers(settings: LlmConfig) -> dict[str, str]:
    """JSON content, and the API key (read from the environment now) in the Authorization header only."""
    headers = {"Content-Type": "application/json"}
    key = settings.api_key()
    if key:
        headers["Authorization"] = f"Bearer {key}"
    return headers


def client_timeout(settings: LlmConfig) -> httpx.Timeout:
    return httpx.Timeout(settings.timeout_s, connect=min(10.0, settings.timeout_s))
