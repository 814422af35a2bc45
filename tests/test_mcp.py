"""`seem mcp`: the memory tools over MCP, tested with the MCP SDK's own client against the real
server process (stdio transport) on a store built through Dagster."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest

from conftest import SAMPLE_CONVERSATION_ID

pytestmark = pytest.mark.slow  # a real server process over a built store

SEEM = str(Path(sys.executable).parent / "seem")


async def _session(store, calls, *extra: str):
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(command=SEEM, args=["mcp", "--store", str(store), *extra])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        listed = await session.list_tools()
        results = []
        for name, arguments in calls:
            result = await session.call_tool(name, arguments)
            results.append((result.is_error, result.content[0].text))
        return listed.tools, results


def run(store, calls, *extra):
    return anyio.run(lambda: _session(store, calls, *extra))


def test_the_five_tools_answer_over_mcp(sample_store):
    calls = [
        ("schema", {}),
        ("entity_lookup", {"name": "tomas"}),
        ("property_search", {"property": "lives_in", "as_of": "2024-04-01"}),
        ("property_search", {"query": "Didsbury"}),
        ("sql", {"query": "SELECT value FROM properties WHERE property = 'lives_in' AND valid_to IS NULL"}),
        ("search", {"question": "Where does Tomas live now?", "date": "2024-11-01", "k": 10}),
    ]
    tools, results = run(sample_store, calls)
    assert [t.name for t in tools] == ["schema", "entity_lookup", "property_search", "sql", "search"]
    assert all(t.description and t.input_schema["type"] == "object" for t in tools)
    assert not any(error for error, _ in results), results
    schema, lookup, held, found, sql, search = (json.loads(text) for _, text in results)
    assert {"passages", "facts", "properties"} <= set(schema["views"]) and "properties_on" in schema["macros"]
    assert any(p["property"] == "lives_in" and p["single_valued"] for p in schema["property_names"])
    tomas = lookup["entities"][0]
    assert tomas["entity"] == "Tomas" and tomas["match"] == 1.0
    assert {"property": "lives_in", "value": "Didsbury"}.items() <= next(p for p in tomas["current"] if p["property"] == "lives_in").items()
    assert next(p for p in tomas["past"] if p["property"] == "lives_in")["value"] == "Chorlton"
    assert [(r["value"], r["turn_ref"]) for r in held["rows"]] == [("Chorlton", "s1-12")]
    assert found["rows"][0]["value"] == "Didsbury" and found["rows"][0]["turn_ref"] == "s4-12"
    assert sql["rows"] == [{"value": "Didsbury"}]
    assert "s4-12" in [p["source_ref"] for p in search["passages"]] and all(p["reason"] for p in search["passages"])
    assert any(h.startswith("Tomas lives_in: Didsbury since 2024-09-01") for h in search["property_histories"])


def test_hostile_calls_are_tool_errors_with_one_line_and_the_server_keeps_serving(sample_store):
    calls = [
        ("sql", {"query": "COPY (SELECT * FROM passages) TO '/tmp/stolen.csv'"}),
        ("sql", {"query": "SELECT * FROM read_csv('/etc/passwd')"}),
        ("sql", {"query": "SELECT 1; DROP VIEW passages"}),
        ("entity_lookup", {"name": "tomas", "conversation_id": "../../etc"}),
        ("entity_lookup", {"name": "x" * 500}),
        ("property_search", {"as_of": "last spring"}),
        ("search", {"question": "anything", "k": 500}),
        ("search", {"question": "   "}),
        ("no_such_tool", {}),
        ("sql", {"query": "SELECT count(*) AS n FROM passages"}),
    ]
    _, results = run(sample_store, calls, "--conversation", SAMPLE_CONVERSATION_ID)
    *refused, (ok_error, ok_text) = results
    assert all(error for error, _ in refused), refused
    texts = [text for _, text in refused]
    assert "refused COPY" in texts[0] and "refused read_csv()" in texts[1] and "only one statement may run" in texts[2]
    assert "is not in this store" in texts[3]
    assert "200" in texts[4]  # the argument's limit, from the tool's schema
    assert "as_of 'last spring' is not an ISO date" in texts[5]
    assert "less than or equal to 50" in texts[6] and "question is empty" in texts[7]
    assert "no_such_tool" in texts[8]
    assert not ok_error and json.loads(ok_text)["rows"] == [{"n": 48}]
    assert not Path("/tmp/stolen.csv").exists()


def test_the_server_refuses_to_start_on_an_empty_store_or_an_unknown_conversation(tmp_path, sample_store):
    from conftest import seem_cli

    empty = seem_cli("mcp", "--store", str(tmp_path))
    assert empty.returncode == 1 and "no conversation in the store" in empty.stderr
    unknown = seem_cli("mcp", "--store", str(sample_store), "--conversation", "nobody")
    assert unknown.returncode == 2 and "'nobody' is not in this store" in unknown.stderr
