"""`seem ask --agent`: the tool-using answerer against a real local HTTP server.

STAND-IN: no small model that runs on these CPUs calls tools reliably, so the chat API is a real
HTTP server on loopback that replays a scripted conversation (tool calls, then an answer) in
OpenAI's format. Everything else is real: the `seem ask` process, its HTTP client with retries, the
MCP server's tools called in-process on a store built through Dagster.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from conftest import SAMPLE_CONVERSATION_ID, seem_cli

pytestmark = pytest.mark.slow  # a built store and real processes


def tool_call(i: int, name: str, arguments: dict | str) -> dict:
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": args}}


def reply(message: dict, finish: str = "stop") -> tuple[int, dict]:
    return 200, {"choices": [{"message": {"role": "assistant", **message}, "finish_reason": finish}],
                 "usage": {"prompt_tokens": 100, "completion_tokens": 20}}


class ScriptedChat(BaseHTTPRequestHandler):
    """STAND-IN for an OpenAI-compatible chat server: replays ``script`` (status, body) in order,
    then answers every further request with ``after``; records each request."""

    script: list = []
    after: tuple = (200, {})
    seen: list = []

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen.append((dict(self.headers), body))
        status, payload = type(self).script.pop(0) if type(self).script else type(self).after
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def chat_server():
    ScriptedChat.script, ScriptedChat.seen, ScriptedChat.after = [], [], (500, {"error": "script ran out"})
    server = ThreadingHTTPServer(("127.0.0.1", 0), ScriptedChat)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()


def ask(store, base_url, *extra: str, env_key: str | None = None) -> tuple[int, dict | str, str]:
    import os

    env = {**os.environ, "SEEM_LLM_API_KEY": env_key} if env_key else None
    done = seem_cli("ask", "--agent", "--json", "--store", str(store), "--conversation", SAMPLE_CONVERSATION_ID,
                    "--backend", "openai", "--base-url", base_url, "--model", "scripted", "--date", "2024-11-01",
                    "--set", "llm.backoff_s=0", "--set", "llm.max_retries=1", *extra, "Where does Tomas live now?", env=env)
    try:
        return done.returncode, json.loads(done.stdout), done.stderr
    except json.JSONDecodeError:
        return done.returncode, done.stdout, done.stderr


def test_the_agent_calls_tools_reads_their_results_and_answers_with_every_call_recorded(sample_store, chat_server):
    ScriptedChat.script = [
        reply({"content": None, "tool_calls": [tool_call(1, "search", {"question": "Where does Tomas live now?", "date": "2024-11-01"})]},
              "tool_calls"),
        reply({"content": None, "tool_calls": [
            tool_call(2, "sql", {"query": "SELECT value, valid_from FROM properties WHERE property = 'lives_in' AND valid_to IS NULL"}),
            tool_call(3, "sql", {"query": "DROP VIEW properties"}),
            tool_call(4, "entity_lookup", "{not json"),
            tool_call(5, "search", {"question": "Where?", "k": "5"}),  # strictly typed, as over MCP
        ]}, "tool_calls"),
        reply({"content": "Tomas lives in Didsbury; he moved there in September 2024 (before that, Chorlton)."}),
    ]
    code, out, err = ask(sample_store, chat_server, env_key="sk-agent-secret")
    assert code == 0, err
    assert out["answer"].startswith("Tomas lives in Didsbury") and out["stopped"] == "answered"
    calls = out["tool_calls"]
    assert [c["name"] for c in calls] == ["search", "sql", "sql", "entity_lookup", "search"]
    assert not calls[0]["error"] and "s4-12" in calls[0]["result"] and "Tomas lives_in: Didsbury since 2024-09-01" in calls[0]["result"]
    assert not calls[1]["error"] and json.loads(calls[1]["result"])["rows"][0]["value"] == "Didsbury"
    assert calls[2]["error"] and "refused DDL (DROP)" in calls[2]["result"]
    assert calls[3]["error"] and calls[3]["result"].startswith("arguments are not valid JSON")
    assert calls[4]["error"] and calls[4]["result"] == "search: k: expected integer, got string"
    assert [m["status"] for m in out["model_calls"]] == ["ok", "ok", "ok"] and out["model_calls"][0]["prompt_tokens"] == 100
    # what the server saw: the five tools, the tool results fed back by id, the key only in its header
    headers, first = ScriptedChat.seen[0]
    assert [t["function"]["name"] for t in first["tools"]] == ["schema", "entity_lookup", "property_search", "sql", "search"]
    assert first["tools"][4]["function"]["parameters"]["properties"]["k"]["maximum"] == 50
    assert headers["Authorization"] == "Bearer sk-agent-secret"
    last = ScriptedChat.seen[2][1]["messages"]
    assert [m["role"] for m in last] == ["system", "user", "assistant", "tool", "assistant", "tool", "tool", "tool", "tool"]
    assert [m["tool_call_id"] for m in last if m["role"] == "tool"] == ["call_1", "call_2", "call_3", "call_4", "call_5"]
    assert "sk-agent-secret" not in json.dumps(out) and "sk-agent-secret" not in err


def test_the_tool_call_cap_forces_an_answer_without_tools(sample_store, chat_server):
    ScriptedChat.script = [reply({"content": None, "tool_calls": [tool_call(i, "schema", {}) for i in (1, 2)]}, "tool_calls"),
                           reply({"content": None, "tool_calls": [tool_call(i, "schema", {}) for i in (3, 4)]}, "tool_calls")]
    ScriptedChat.after = reply({"content": "Didsbury."})
    code, out, err = ask(sample_store, chat_server, "--max-tool-calls", "3")
    assert code == 0, err
    assert out["answer"] == "Didsbury." and out["stopped"] == "tool budget spent"
    assert [c["error"] for c in out["tool_calls"]] == [False, False, False, True]
    assert "budget of 3 tool calls" in out["tool_calls"][3]["result"]
    forced = ScriptedChat.seen[-1][1]
    assert "tools" not in forced and forced["messages"][-1]["content"].startswith("The tool-call budget is spent")


def test_a_model_that_keeps_failing_ends_the_question_with_its_reason(sample_store, chat_server):
    ScriptedChat.after = (503, {"error": "overloaded"})
    code, out, _ = ask(sample_store, chat_server)
    assert code == 1 and out["answer"] is None and out["stopped"] == "model failed"
    assert out["error"].startswith("HTTP 503") and "after 2 attempts" in out["error"]
    assert len(ScriptedChat.seen) == 2  # one retry (llm.max_retries=1), then the question ends


def test_ask_without_a_chat_api_says_what_it_needs(sample_store):
    done = seem_cli("ask", "--agent", "--store", str(sample_store), "Where does Tomas live?")
    assert done.returncode == 2 and "--agent needs an OpenAI-compatible chat API with tool calls" in done.stderr
