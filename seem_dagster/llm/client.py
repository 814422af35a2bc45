"""Prompts in, checked JSON out: the cache, one repair retry, the failure and usage accounting.

Pure apart from the engine call. The cache maps a request key (backend, model, prompt name and
version, input) to what came of it, failures included: a model at temperature 0 gives the same
bad output again, so a rebuild with the same settings makes zero calls and reports the same
failures. Calls that never got an answer (timeouts, HTTP errors after the retries) are not cached.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

from seem_dagster.llm.engine import ChatReply, ChatRequest, Engine
from seem_dagster.llm.parse import parse_reply
from seem_dagster.llm.prompts import Prompt

OK, FAILED, UNANSWERED = "ok", "failed", "unanswered"


@dataclass
class CallRecord:
    key: str
    item_id: str
    prompt: str
    prompt_version: str
    status: str  # ok | failed (bad output after the repair retry) | unanswered (no reply from the engine)
    cached: bool
    calls: int  # model calls this run (0 when cached), repair included
    prompt_tokens: int
    completion_tokens: int
    error: str | None = None
    raw: str | None = None


@dataclass
class LlmRun:
    outputs: list[dict | None]  # aligned with the items; None where the call failed
    records: list[CallRecord]
    new_entries: dict[str, str] = field(default_factory=dict)


def _entry(status: str, output: dict | None, raw: str | None, error: str | None, calls: int, pt: int, ct: int) -> str:
    return json.dumps({"status": status, "output": output, "raw": raw, "error": error, "calls": calls,
                       "prompt_tokens": pt, "completion_tokens": ct}, ensure_ascii=False)


class LlmClient:
    def __init__(self, engine: Engine, cache: dict[str, str] | None = None, max_tokens: int | None = None):
        self.engine = engine
        self.cache = cache if cache is not None else {}
        settings = getattr(engine, "settings", None)
        # Caps every prompt's own max_tokens (LlmConfig.max_tokens).
        self.max_tokens = max_tokens if max_tokens is not None else getattr(settings, "max_tokens", None)
        self.sampling = f"temperature={settings.temperature};format={settings.response_format}" if settings is not None else ""

    def run(self, prompt: Prompt, items: Sequence[tuple[str, dict]]) -> LlmRun:
        """``items`` are (item id, payload); every uncached request goes to the engine in one batch."""
        requests = [prompt.request(self.engine.backend, self.engine.model, payload, self.max_tokens, self.sampling) for _, payload in items]
        todo: dict[str, ChatRequest] = {}
        for req in requests:
            if req.key not in self.cache and req.key not in todo:
                todo[req.key] = req
        fresh = self._complete(prompt, list(todo.values()))
        new_entries = {k: v for k, v in fresh.items() if json.loads(v)["status"] != UNANSWERED}
        self.cache.update(new_entries)
        outputs, records, counted = [], [], set()
        for (item_id, _), req in zip(items, requests):
            entry = json.loads(self.cache.get(req.key) or fresh[req.key])
            first_time = req.key in fresh and req.key not in counted
            counted.add(req.key)
            outputs.append(entry["output"] if entry["status"] == OK else None)
            records.append(CallRecord(
                key=req.key, item_id=item_id, prompt=prompt.name, prompt_version=prompt.version, status=entry["status"],
                cached=not first_time, calls=entry["calls"] if first_time else 0,
                prompt_tokens=entry["prompt_tokens"] if first_time else 0,
                completion_tokens=entry["completion_tokens"] if first_time else 0,
                error=entry["error"], raw=entry["raw"],
            ))
        return LlmRun(outputs, records, new_entries)

    def _complete(self, prompt: Prompt, requests: list[ChatRequest]) -> dict[str, str]:
        if not requests:
            return {}
        first = self._by_key(requests, self.engine.complete(requests))
        done: dict[str, str] = {}
        repairs: list[ChatRequest] = []
        first_reason: dict[str, str] = {}
        for req in requests:
            reply = first[req.key]
            if reply.text is None:
                done[req.key] = _entry(UNANSWERED, None, None, reply.error or "no reply", reply.attempts, 0, 0)
                continue
            value, reason = parse_reply(reply.text, req.schema)
            if value is not None:
                done[req.key] = _entry(OK, value, None, None, 1, reply.prompt_tokens, reply.completion_tokens)
            else:
                first_reason[req.key] = reason
                repairs.append(prompt.repair(req, reply.text, reason))
        second = self._by_key(repairs, self.engine.complete(repairs)) if repairs else {}
        for req in repairs:
            one, two = first[req.key], second[req.key]
            pt, ct = one.prompt_tokens + two.prompt_tokens, one.completion_tokens + two.completion_tokens
            if two.text is None:
                done[req.key] = _entry(UNANSWERED, None, one.text, f"{first_reason[req.key]}; repair call got no reply: {two.error}", 2, pt, ct)
                continue
            value, reason = parse_reply(two.text, req.schema)
            if value is not None:
                done[req.key] = _entry(OK, value, None, None, 2, pt, ct)
            else:
                done[req.key] = _entry(FAILED, None, two.text, f"{first_reason[req.key]}; after the repair retry: {reason}", 2, pt, ct)
        return done

    def _by_key(self, requests: list[ChatRequest], replies: list[ChatReply]) -> dict[str, ChatReply]:
        if len(replies) != len(requests):
            raise RuntimeError(f"{self.engine.backend} engine returned {len(replies)} replies for {len(requests)} requests")
        return {req.key: reply for req, reply in zip(requests, replies)}


def records_as_rows(records: Sequence[CallRecord], conversation_id: str, backend: str, model: str) -> list[dict]:
    return [{**asdict(r), "conversation_id": conversation_id, "backend": backend, "model": model} for r in records]
