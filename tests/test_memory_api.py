"""`Memory`, the public API, on the real pipeline: turns added from Python are built through Dagster;
reads follow each publish (a long-lived `Memory` and a running MCP server see a rebuild at their next
call); bad input is refused with one line and nothing written; `seem eval`'s `seem` is this ranking."""

from __future__ import annotations

import contextlib
import io
import json
import re
import sys
import threading
from datetime import datetime
from pathlib import Path

import anyio
import pytest

from conftest import ROOT, SAMPLE_CONVERSATION_ID, files_under, write_jsonl

pytestmark = pytest.mark.slow  # builds through Dagster

SEEM = str(Path(sys.executable).parent / "seem")


def turns(*texts: str, day: str = "2024-03-02", first: int = 0) -> list[dict]:
    return [{"speaker": "Alice" if (first + n) % 2 == 0 else "Bob", "text": t, "timestamp": f"{day}T19:{first + n:02d}:00",
             "id": f"m{first + n}"} for n, t in enumerate(texts)]


FIRST = turns("I moved to Leeds in March.", "How do you like the new flat?", "I love it, the light is lovely in the mornings.")
LATER = turns("I joined a pottery class near the station.", "What did you make first?", day="2024-04-10", first=3)


def test_the_readme_example_runs_as_written(tmp_path, monkeypatch):
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Use from Python", 1)[1].split("\n## ", 1)[0]
    (code,) = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md (Use from Python)", "exec"), {})
    printed = out.getvalue()
    assert printed.splitlines()[0].startswith("1 m1 I moved to Leeds in March.")
    assert "lives_in" in printed and "Leeds" in printed and "pottery" not in printed.split("forgot")[-1]
    assert (tmp_path / "memories" / "_manifests" / "alice.json").exists()


def test_add_then_search_and_a_second_add_extracts_only_the_new_turns(tmp_path):
    from seem_dagster import Memory

    with Memory.open(tmp_path / "store") as memory:
        first = memory.add("alice", FIRST)
        assert (first.status, first.turns_added, first.passages, first.extracted) == ("new", 3, 3, 3) and first.build_id
        hits = memory.search("alice", "Where does Alice live?", k=3)
        assert hits[0].source_ref == "m0" and hits[0].text == FIRST[0]["text"] and hits[0].reason.kind == "seed_fact"
        assert hits[0].timestamp == datetime(2024, 3, 2, 19, 0) and hits[0].to_json()["why"]["fact"] == ["Alice", "move to", "Leeds"]
        second = memory.add("alice", LATER)
        assert (second.status, second.turns_added, second.passages) == ("changed", 2, 5)
        assert second.extracted == 2  # the first three came from the extraction cache
        assert memory.search("alice", "What class did Alice join?", k=1)[0].source_ref == "m3"
        # The second add is a commit on the first build (an append), not a run of its own.
        assert second.build_id is None and second.commit is not None
        assert memory.build_id("alice") == first.build_id and memory.commit("alice") == second.commit
        assert memory.conversations() == ["alice"]
        # A turn without an id or a timestamp gets both; the default session is its day.
        third = memory.add("alice", {"speaker": "Alice", "text": "A vase, for my mother."})
        assert third.turns_added == 1 and third.extracted == 1
        refs = memory.index("alice").source_refs.values()
        assert any(re.fullmatch(r"\d{4}-\d\d-\d\d:0", r) for r in refs)


def test_a_long_lived_memory_sees_what_another_writer_publishes(tmp_path):
    from seem_dagster import Memory

    store = tmp_path / "store"
    reader, writer = Memory.open(store), Memory.open(store)
    writer.add("alice", FIRST)
    before = reader.query("alice", "What class did Alice join?")
    assert "m3" not in {h.source_ref for h in before.hits}
    added = writer.add("alice", LATER)
    after = reader.query("alice", "What class did Alice join?")
    assert (after.build_id, after.commit) == (before.build_id, added.commit) and before.commit is None
    assert after.hits[0].source_ref == "m3"
    reader.close(), writer.close()


def test_a_running_mcp_server_sees_a_new_publish_without_a_restart(tmp_path):
    from mcp import ClientSession, StdioServerParameters, stdio_client

    from seem_dagster import Memory

    store = tmp_path / "store"
    memory = Memory.open(store)
    memory.add("alice", FIRST)

    async def session():
        params = StdioServerParameters(command=SEEM, args=["mcp", "--store", str(store), "--conversation", "alice"])
        async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            ask = {"question": "What class did Alice join?", "k": 5}
            first = json.loads((await client.call_tool("search", ask)).content[0].text)
            memory.add("alice", LATER)  # published while the server runs
            second = json.loads((await client.call_tool("search", ask)).content[0].text)
            rows = json.loads((await client.call_tool("sql", {"query": "SELECT count(*) AS n FROM passages"})).content[0].text)
            return first, second, rows

    first, second, rows = anyio.run(session)
    assert "m3" not in [p["source_ref"] for p in first["passages"]]
    assert second["passages"][0]["source_ref"] == "m3" and rows["rows"] == [{"n": 5}]
    memory.close()


@pytest.mark.parametrize("bad, message", [
    ([{"speaker": "Alice"}], "add to 'alice': turn 1: field 'text': missing"),
    ([FIRST[0], {"speaker": "Bob", "text": "   "}], "turn 2: field 'text': empty text"),
    ([{"speaker": "Alice", "text": "Hi", "timestamp": "last tuesday"}], "turn 1: field 'timestamp': unparseable date 'last tuesday'"),
    ([{"speaker": "Alice", "txt": "Hi"}], "turn 1: field 'txt': unknown field"),
    ([{"speaker": "Alice", "text": "Hi", "id": "a"}, {"speaker": "Bob", "text": "Yo", "id": "a"}], "turn 2: field 'id': duplicate id 'a'"),
    ([], "add to 'alice': no turns given"),
    (["Hi there"], "turn 1: expected a dict or a Turn, got str"),
    ([{"speaker": "Alice", "text": "x" * 50}], "turn 1: field 'text': 50 characters, over the limit of 40"),
])
def test_bad_turns_are_refused_with_one_line_and_nothing_is_written(bad, message, tmp_path):
    from seem_dagster import Memory
    from seem_dagster.ingest import InputError

    with Memory.open(tmp_path / "store", ingest={"max_turn_chars": 40}) as memory:
        with pytest.raises(InputError) as err:
            memory.add("alice", bad)
    assert message in str(err.value) and "\n" not in str(err.value)
    assert files_under(tmp_path / "store") == []


def test_a_turn_that_clashes_with_an_earlier_one_changes_nothing(tmp_path):
    from seem_dagster import Memory
    from seem_dagster.ingest import InputError

    store = tmp_path / "store"
    with Memory.open(store) as memory:
        memory.add("alice", FIRST)
        before = {p: p.read_bytes() for p in files_under(store)}
        with pytest.raises(InputError, match=r"add to 'alice': turn 2: field 'id': duplicate id 'm1' \(also log line 2\)"):
            memory.add("alice", [LATER[0], {**LATER[1], "id": "m1"}])
        with pytest.raises(ValueError, match="is built from .*sample_conversation.jsonl: add its turns to that file"):
            memory.add_file(ROOT / "data" / "sample_conversation.jsonl")
            memory.add(SAMPLE_CONVERSATION_ID, LATER)
        assert {p: p.read_bytes() for p in files_under(store) if SAMPLE_CONVERSATION_ID not in str(p)} == before


def test_a_forgotten_turn_added_again_stays_out(tmp_path):
    from seem_dagster import Memory

    store = tmp_path / "store"
    with Memory.open(store) as memory:
        memory.add("alice", FIRST)
        memory.forget("alice", turns=["m2"])
        again = memory.add("alice", [{**FIRST[2], "id": "m9"}])  # the same turn, said at the same time
        assert (again.status, again.forgotten, again.passages) == ("forgotten", 1, 2)
        assert "lovely" not in (store / "_inputs" / "alice.jsonl").read_text()


def test_threads_read_while_turns_are_added(tmp_path):
    from seem_dagster import Memory

    store = tmp_path / "store"
    memory = Memory.open(store)
    memory.add("alice", FIRST)
    seen, errors, stop = [], [], threading.Event()

    def read():
        while not stop.is_set():
            try:
                recall = memory.query("alice", "What did Alice say?", k=50)
                seen.append(((recall.build_id, recall.commit), len(recall.hits)))
            except Exception as err:  # noqa: BLE001 - every failure is what the test looks for
                errors.append(f"{type(err).__name__}: {err}")

    readers = [threading.Thread(target=read, daemon=True) for _ in range(4)]
    for t in readers:
        t.start()
    for n in range(3):
        memory.add("alice", turns(f"Note number {n} about the garden.", day="2024-05-0" + str(n + 1), first=10 + n))
    stop.set()
    for t in readers:
        t.join(timeout=60)
    memory.close()
    assert not errors, errors[:3]
    per_build: dict[tuple, set[int]] = {}
    for build, n in seen:
        per_build.setdefault(build, set()).add(n)
    assert all(len(sizes) == 1 for sizes in per_build.values()) and {next(iter(s)) for s in per_build.values()} <= {3, 4, 5, 6}


def test_search_is_the_evaluations_seem_ranking(sample_store):
    """`seem eval` ranks `seem` with Memory's own encoding and ranking: the same order, question by question."""
    import polars as pl

    from seem_dagster import Memory
    from seem_dagster.evaluation.methods import ids, rankers
    from seem_dagster.memory.api import MAX_K
    from seem_dagster.retrieval.query import form_of

    with Memory.open(sample_store) as memory:
        config = memory.config.retrieval
        seem = rankers(config, ["seem"])["seem"]
        questions = memory.sql("SELECT question, question_date FROM questions", SAMPLE_CONVERSATION_ID).frame
        assert questions.height == 12
        for question, date in questions.select(pl.col("question"), pl.col("question_date")).iter_rows():
            searched = [h.passage_id for h in memory.search(SAMPLE_CONVERSATION_ID, question, k=MAX_K, date=date)]
            query = memory.encode(SAMPLE_CONVERSATION_ID, question, date, facts=[], several=form_of(question, config))
            assert ids(seem(memory.index(SAMPLE_CONVERSATION_ID), query)) == searched, question


def test_open_takes_the_tree_as_dotted_keys_sections_a_file_or_a_mapping(tmp_path):
    from seem_dagster import Memory
    from seem_dagster.config import ConfigError

    path = tmp_path / "seem.toml"
    path.write_text("[retrieval]\ntop_facts = 3\nuse_rpe = false\n")
    memory = Memory.open(tmp_path / "store", config=path, retrieval={"top_facts": 8}, **{"query.k": 4})
    assert (memory.config.retrieval.top_facts, memory.config.retrieval.use_rpe, memory.config.query.k) == (8, False, 4)
    assert memory.store == str(tmp_path / "store")
    assert Memory.open(config={"retrieval": {"damping": 0.7}}).config.retrieval.damping == 0.7
    with pytest.raises(ConfigError, match="unknown setting 'retrieval.top_fact'"):
        Memory.open(tmp_path, **{"retrieval.top_fact": 8})
    with pytest.raises(ConfigError, match="setting retrieval.damping: Input should be less than 1"):
        Memory.open(tmp_path, retrieval={"damping": 1.5})
    write_jsonl(tmp_path / "x.jsonl", [])  # (nothing built: opening writes nothing)
    assert [p.name for p in files_under(tmp_path)] == ["seem.toml", "x.jsonl"]


def test_the_mcp_server_offers_forget_only_when_the_operator_allows_it(tmp_path):
    from mcp import ClientSession, StdioServerParameters, stdio_client

    from seem_dagster import Memory

    store = tmp_path / "store"
    with Memory.open(store) as memory:
        memory.add("alice", FIRST)

    async def session(*extra):
        params = StdioServerParameters(command=SEEM, args=["mcp", "--store", str(store), "--conversation", "alice", *extra])
        async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            names = [t.name for t in (await client.list_tools()).tools]
            forgot = await client.call_tool("forget", {"turns": ["m2"]})
            search = await client.call_tool("search", {"question": "How is the light in the flat?", "k": 5})
            return names, (forgot.is_error, forgot.content[0].text), json.loads(search.content[0].text)

    names, (error, text), _ = anyio.run(session)
    assert "forget" not in names and error and "forget" in text
    names, (error, text), search = anyio.run(lambda: session("--set", "agent.allow_forget=true"))
    assert "forget" in names and not error and json.loads(text)["source_refs"] == ["m2"]
    assert "m2" not in [p["source_ref"] for p in search["passages"]]
