"""`seem ask --agent`: a tool-using answerer over an OpenAI-compatible chat API with tool calls.

The model gets the question and the memory tools (the MCP server's own tools and schemas, called
in-process, so a call is validated exactly as over MCP) and calls them until it answers. At most
``agent.max_tool_calls`` tool calls per question (APEX-MEM caps at 40): once spent, the next request
carries no tools and asks for the answer. Every model call and every tool call with its result is
recorded. Model calls follow the other model calls' rules (retries with back-off on 429, 5xx,
timeouts and connection errors; the key read from ``llm.api_key_env`` and sent only in the
Authorization header); a question whose model call still fails ends with its reason, not a crash.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime

import httpx

from seem_dagster.agent.mcp_server import refused_arguments
from seem_dagster.config import AgentConfig, LlmConfig
from seem_dagster.llm.http import client_headers, client_timeout, post_with_retries

SYSTEM = (
    "You answer questions about a long conversation between people, using only the memory tools. The memory keeps every "
    "value with its history: a property's valid_to is null while it holds; a later value of a single-valued property "
    "supersedes the earlier. Prefer the value that holds on the question's date unless the question asks about an earlier "
    "time. Call tools to find evidence (search first is usually best), then answer in one short sentence with absolute "
    "dates. If the memory does not say, answer \"not in memory\"."
)
BUDGET_SPENT = "The tool-call budget is spent. Answer now, from what the tools returned, in one short sentence."


@dataclass
class ToolCall:
    turn: int
    name: str
    arguments: str  # as the model sent them
    result: str  # what the model read (cut at agent.max_result_chars)
    error: bool
    seconds: float


@dataclass
class ModelCall:
    turn: int
    status: str  # ok | failed
    finish_reason: str | None
    prompt_tokens: int
    completion_tokens: int
    attempts: int
    error: str | None = None


@dataclass
class AgentAnswer:
    question: str
    answer: str | None
    stopped: str  # answered | tool budget spent | turn cap | model failed
    tool_calls: list[ToolCall] = field(default_factory=list)
    model_calls: list[ModelCall] = field(default_factory=list)
    error: str | None = None

    def to_json(self) -> dict:
        return asdict(self)


class ToolBox:
    """The MCP server's tools, listed in OpenAI's function format and called in-process."""

    def __init__(self, server):
        self.server = server
        self.specs = [{"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.input_schema}}
                      for t in asyncio.run(server.list_tools())]
        self.schemas = {s["function"]["name"]: s["function"]["parameters"] for s in self.specs}

    def call(self, name: str, arguments: str) -> tuple[str, bool]:
        """(result text, is an error). Bad JSON, an unknown tool or a refused call come back as the error's text."""
        from mcp.server.mcpserver.exceptions import ToolError

        try:
            parsed = json.loads(arguments or "{}")
        except json.JSONDecodeError as err:
            return f"arguments are not valid JSON: {err.msg} at column {err.colno}", True
        if not isinstance(parsed, dict):
            return "arguments must be a JSON object", True
        # The same refusals the server's middleware makes over MCP: a model's call is no more trusted in-process.
        why = refused_arguments(name, parsed, self.schemas)
        if why is not None:
            return why, True
        try:
            result = asyncio.run(self.server.call_tool(name, parsed))
        except ToolError as err:
            return str(err), True
        except Exception as err:  # a crash inside a tool: the model reads that it failed, the run goes on
            return f"tool {name} failed: {type(err).__name__}", True
        return "\n".join(getattr(c, "text", "") for c in result.content), bool(result.is_error)


class ChatClient:
    """POST {base_url}/chat/completions with tools; one request at a time (a conversation is sequential)."""

    def __init__(self, settings: LlmConfig, agent: AgentConfig, transport: httpx.AsyncBaseTransport | None = None):
        self.settings = settings
        self.agent = agent
        self.url = settings.base_url.rstrip("/") + "/chat/completions"
        self._transport = transport

    def __repr__(self) -> str:  # never the key
        return f"ChatClient(url={self.url!r}, model={self.settings.model!r})"

    def complete(self, messages: list[dict], tools: list[dict] | None) -> tuple[dict | None, ModelCall]:
        body = {"model": self.settings.model, "messages": messages, "temperature": self.settings.temperature,
                "max_tokens": min(self.agent.max_tokens, self.settings.max_tokens)}
        if tools:
            body |= {"tools": tools, "tool_choice": "auto"}

        async def post():
            async with httpx.AsyncClient(headers=client_headers(self.settings), timeout=client_timeout(self.settings),
                                         transport=self._transport) as client:
                return await post_with_retries(client, asyncio.Semaphore(1), self.url, body, self.settings)

        response, error, attempts = asyncio.run(post())
        if response is None:
            return None, ModelCall(0, "failed", None, 0, 0, attempts, error)
        try:
            data = response.json()
            choice = data["choices"][0]
            message = choice["message"]
            if not isinstance(message, dict):
                raise TypeError("message is not an object")
        except (ValueError, KeyError, IndexError, TypeError) as err:
            return None, ModelCall(0, "failed", None, 0, 0, attempts, f"malformed response ({type(err).__name__}): {response.text[:300]}")
        usage = data.get("usage") or {}
        return message, ModelCall(0, "ok", choice.get("finish_reason"), int(usage.get("prompt_tokens") or 0),
                                  int(usage.get("completion_tokens") or 0), attempts)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"... [cut: {len(text)} characters, agent.max_result_chars={limit}]"


def answer_with_tools(question: str, date: datetime, conversation_id: str, tools: ToolBox, chat: ChatClient,
                      config: AgentConfig) -> AgentAnswer:
    out = AgentAnswer(question, None, "turn cap")
    messages = [{"role": "system", "content": SYSTEM},
                {"role": "user", "content": json.dumps({"question": question, "question_date": date.date().isoformat(),
                                                        "conversation_id": conversation_id}, ensure_ascii=False)}]
    spent = False
    executed = 0
    for turn in range(1, config.max_turns + 1):
        last = turn == config.max_turns
        if spent or last:
            messages.append({"role": "user", "content": BUDGET_SPENT})
        message, record = chat.complete(messages, None if (spent or last) else tools.specs)
        record.turn = turn
        out.model_calls.append(record)
        if message is None:
            out.stopped, out.error = "model failed", record.error
            return out
        calls = message.get("tool_calls") or []
        if not calls or spent or last:
            out.answer = (message.get("content") or "").strip() or None
            out.stopped = "answered" if not spent else "tool budget spent"
            if out.answer is None:
                out.error = "the model's last reply had no text"
            return out
        messages.append({"role": "assistant", "content": message.get("content"), "tool_calls": calls})
        for call in calls:
            function = call.get("function") or {}
            name, arguments = str(function.get("name") or ""), function.get("arguments") or "{}"
            if not isinstance(arguments, str):
                arguments = json.dumps(arguments)
            started = time.perf_counter()
            if executed >= config.max_tool_calls:
                result, error = f"refused: the budget of {config.max_tool_calls} tool calls (agent.max_tool_calls) is spent", True
            else:
                result, error = tools.call(name, arguments)
                executed += 1
            result = _cut(result, config.max_result_chars)
            out.tool_calls.append(ToolCall(turn, name, arguments, result, error, round(time.perf_counter() - started, 3)))
            messages.append({"role": "tool", "tool_call_id": str(call.get("id") or f"call_{len(out.tool_calls)}"), "content": result})
        spent = executed >= config.max_tool_calls
    return out
