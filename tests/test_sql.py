"""SQL over the memory: one read-only SELECT over DuckDB views of a consistent snapshot, with every
hostile statement refused by a clear one-line error that changes nothing."""

from __future__ import annotations

import hashlib
import json
import time
from datetime import datetime
from pathlib import Path

import polars as pl
import pytest

from conftest import SAMPLE_CONVERSATION_ID as CONVERSATION
from conftest import files_under, seem_cli
from seem_dagster.config import SqlConfig
from seem_dagster.sql.guard import SqlRefused
from seem_dagster.sql.memory import Loaded, SqlMemory
from seem_dagster.sql.output import render

PROPERTIES = pl.DataFrame({
    "conversation_id": ["c1", "c1", "c1"], "entity": ["Tomas", "Tomas", "Priya"], "property": ["lives_in", "lives_in", "coach"],
    "value": ["Chorlton", "Didsbury", "Marta"],
    "valid_from": [datetime(2024, 3, 2), datetime(2024, 9, 1), datetime(2024, 4, 14)],
    "valid_to": [datetime(2024, 9, 1), None, None],
})
PASSAGES = pl.DataFrame({"conversation_id": ["c1"] * 300, "passage_id": [f"p{i}" for i in range(300)], "text": ["hi"] * 300})


@pytest.fixture
def memory():
    with SqlMemory(Loaded({"properties": PROPERTIES, "passages": PASSAGES}, ["c1"]), SqlConfig(max_rows=50, timeout_s=1.0)) as m:
        yield m


def test_a_select_runs_over_the_views_and_the_as_of_macro_gives_what_held_on_a_day(memory):
    result = memory.query("WITH moves AS (SELECT * FROM properties WHERE property = 'lives_in') SELECT value FROM moves ORDER BY valid_from")
    assert result.frame["value"].to_list() == ["Chorlton", "Didsbury"] and not result.truncated
    held = memory.query("SELECT entity, value FROM properties_on(DATE '2024-05-01') ORDER BY entity")
    assert held.frame.rows() == [("Priya", "Marta"), ("Tomas", "Chorlton")]
    days = memory.query("SELECT date_diff('day', valid_from, DATE '2024-11-01') AS days FROM properties WHERE value = 'Didsbury'")
    assert days.frame["days"].to_list() == [61]


def test_rows_are_capped_and_the_result_says_so(memory):
    result = memory.query("SELECT * FROM passages")
    assert result.frame.height == 50 and result.truncated
    assert "cut at sql.max_rows=50" in render(result, "table", 50)


HOSTILE = [
    ("INSERT INTO passages VALUES ('c1', 'x', 'y')", "refused a write (INSERT)"),
    ("UPDATE properties SET value = 'Leeds'", "refused a write (UPDATE)"),
    ("DELETE FROM properties", "refused a write (DELETE)"),
    ("CREATE TABLE stolen AS SELECT * FROM passages", "refused DDL (CREATE)"),
    ("DROP VIEW passages", "refused DDL (DROP)"),
    ("ATTACH '/tmp/seem-hostile.db' AS other", "refused ATTACH"),
    ("COPY passages TO '/tmp/seem-hostile.csv'", "refused COPY"),
    ("COPY (SELECT 1) TO '/tmp/seem-hostile.csv'", "refused COPY"),
    ("INSTALL httpfs", "refused INSTALL/LOAD"),
    ("LOAD httpfs", "refused INSTALL/LOAD"),
    ("PRAGMA database_list", "refused PRAGMA"),
    ("SET enable_external_access = true", "refused SET"),
    ("RESET lock_configuration", "refused SET"),
    ("SELECT 1; DROP VIEW passages", "only one statement may run; got 2"),
    ("SELECT 1; SELECT 2", "only one statement may run; got 2"),
    ("CALL pragma_version()", "refused CALL"),
    ("EXPORT DATABASE '/tmp/seem-hostile'", "refused EXPORT"),
    ("SELECT * FROM read_csv('/etc/passwd')", "refused read_csv(): a query reads the memory's views"),
    ("SELECT * FROM read_text('/etc/hostname')", "refused read_text()"),
    ("SELECT * FROM read_parquet('/tmp/*.parquet')", "refused read_parquet()"),
    ("SELECT * FROM glob('/*')", "refused glob()"),
    ("SELECT * FROM '/etc/passwd'", "refused '/etc/passwd': a query reads the memory's views"),
    ("SELECT * FROM query('COPY (SELECT 1) TO ''/tmp/seem-hostile.csv''')", "refused query(): SQL made from text"),
    ("SELECT * FROM duckdb_extensions()", "refused duckdb_extensions()"),
    ("SELECT * FROM (SELECT read_text FROM (SELECT 1 AS read_text)) t, read_blob('x')", "refused read_blob()"),
    ("SELECT * FROM leaked_frame", "refused 'leaked_frame': a query reads the memory's views"),  # no Python variable is visible
    # DuckDB's parser calls a data-modifying CTE a SELECT; the views (over Arrow data) cannot be written anyway
    ("WITH d AS (DELETE FROM passages RETURNING *) SELECT * FROM d", "SQL error: Binder Error: Can only delete from base table"),
    ("WITH d AS (UPDATE properties SET value = 'x' RETURNING *) SELECT * FROM d", "SQL error: Binder Error: Can only update base table"),
    ("SELEC 1", "SQL does not parse"),
    ("   ", "no SQL given"),
    ("-- nothing", "no SQL statement given"),
]


@pytest.mark.parametrize("sql,message", HOSTILE, ids=[h[0][:40] for h in HOSTILE])
def test_hostile_sql_is_refused_with_one_line_and_changes_nothing(memory, sql, message, tmp_path):
    leaked_frame = pl.DataFrame({"secret": [42]})  # noqa: F841 (a replacement scan would find it)
    with pytest.raises(SqlRefused, match="^" + message.replace("(", r"\(").replace(")", r"\)").replace("*", r"\*")) as refused:
        memory.query(sql)
    assert "\n" not in str(refused.value)
    assert memory.query("SELECT count(*) AS n FROM passages").frame["n"].item() == 300
    assert memory.query("SELECT count(*) AS n FROM properties WHERE value = 'Chorlton'").frame["n"].item() == 1
    assert not any((tmp_path.parent / n).exists() for n in ("seem-hostile.csv", "seem-hostile.db"))


def test_a_runaway_cross_join_is_interrupted_at_the_time_limit_and_the_connection_still_works(memory):
    started = time.perf_counter()
    with pytest.raises(SqlRefused, match=r"^query stopped after the time limit of 1 s \(sql.timeout_s\)$"):
        memory.query("SELECT count(*) FROM passages a, passages b, passages c, passages d, passages e")
    assert time.perf_counter() - started < 5
    assert memory.query("SELECT 1 AS one").frame["one"].item() == 1


def test_over_long_sql_is_refused():
    with SqlMemory(Loaded({"passages": PASSAGES}, ["c1"]), SqlConfig(max_chars=20)) as m:
        with pytest.raises(SqlRefused, match="over the limit of 20"):
            m.query("SELECT passage_id FROM passages WHERE text = 'a long one'")


def _digest(root) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in files_under(root)}


@pytest.mark.slow
def test_seem_sql_on_a_built_store_prints_views_tables_csv_json_and_refuses_hostile_sql_without_touching_it(sample_store):
    store = str(sample_store)
    schema = seem_cli("sql", "--store", store, "--schema")
    assert schema.returncode == 0, schema.stderr
    for view in ("passages", "facts", "properties", "episodes", "entities", "graph_edges", "questions"):
        assert f"\n{view} (" in schema.stdout
    assert "properties_on(day)" in schema.stdout
    table = seem_cli("sql", "--store", store, "--conversation", CONVERSATION,
                     "SELECT entity, value FROM properties WHERE property = 'lives_in' ORDER BY valid_from")
    assert table.returncode == 0, table.stderr
    assert table.stdout.splitlines()[0].split() == ["entity", "|", "value"] and "Didsbury" in table.stdout
    csv = seem_cli("sql", "--store", store, "--format", "csv", "SELECT source_ref, speaker FROM passages ORDER BY session_index, turn_index")
    assert csv.stdout.splitlines()[:2] == ["source_ref,speaker", "s1-01,Priya"]
    as_json = json.loads(seem_cli("sql", "--store", store, "--format", "json", "--max-rows", "3",
                                  "SELECT passage_id, events FROM event_frames").stdout)
    assert as_json["row_count"] == 3 and as_json["truncated"] and isinstance(as_json["rows"][0]["events"], list)
    before = _digest(sample_store)
    # through the CLI: a write, DDL, ATTACH, COPY, INSTALL, LOAD, SET, a second statement, a file read
    for sql, message in [HOSTILE[i] for i in (0, 3, 5, 6, 8, 9, 11, 13, 17)]:
        done = seem_cli("sql", "--store", store, sql)
        assert done.returncode == 2, (sql, done.stdout, done.stderr)
        assert done.stderr.startswith("seem: error: ") and message.split(" (")[0] in done.stderr and done.stderr.count("\n") == 1
    assert _digest(sample_store) == before
    missing = seem_cli("sql", "--store", store, "--conversation", "nobody", "SELECT 1")
    assert missing.returncode == 2 and missing.stderr == "seem: error: no memory of conversation 'nobody' in this store\n"


BOMBS = [
    "SELECT length(repeat('x', 2000000000) || repeat('y', 2000000000)) AS n",
    "SELECT length(string_agg(repeat('x', 1000000), '')) FROM range(5000)",
    "SELECT length(list(i)) AS n FROM range(300000000) t(i)",
]


@pytest.mark.slow
def test_memory_bombs_fail_alone_with_one_line_in_a_bounded_worker_and_the_next_query_answers(sample_store):
    from seem_dagster import Memory

    with Memory.open(sample_store, sql={"memory_limit_mb": 256, "max_result_mb": 1}) as memory:
        with pytest.raises(SqlRefused, match=r"^the result is 1.9 MB, over the limit of 1 MB \(sql.max_result_mb\)"):
            memory.sql("SELECT repeat('x', 2000000) AS s")
        for query in BOMBS:
            with pytest.raises(SqlRefused, match=r"^the query needs more memory than its bound of 256 MB \(sql.memory_limit_mb\)"):
                memory.sql(query)
        assert memory.sql("SELECT count(*) AS n FROM passages").frame["n"].item() == 48
        for pid in memory._sql_pool.worker_pids():  # the workers that ran them, still alive, stayed near their bound
            status = (Path("/proc") / str(pid) / "status").read_text()
            assert int(next(x for x in status.splitlines() if x.startswith("VmHWM:")).split()[1]) < (256 + 400) * 1024


@pytest.mark.slow
def test_every_output_format_writes_odd_types_or_says_why_in_one_line(sample_store):
    odd = ("SELECT {'a': 1, 'b': [1, 2]} AS s, '\\x00ab'::BLOB AS b, INTERVAL 3 DAY AS i, uuid() AS u, 1.5::DECIMAL(10, 2) AS d, "
           "[1, 2]::INTEGER[2] AS arr, map([1], [2]) AS m, 1::HUGEINT AS h, 10::BIT AS bits, union_value(k := 'x') AS un")
    for query in ("SELECT * FROM test_all_types()", odd):  # every type DuckDB has, at its extremes (infinity dates too)
        for fmt in ("table", "csv", "json"):
            done = seem_cli("sql", "--store", str(sample_store), "--format", fmt, query)
            assert done.returncode == 0 and done.stdout.strip(), (query, fmt, done.stderr)
    settings = seem_cli("sql", "--store", str(sample_store), "--format", "csv", "SELECT name, value FROM duckdb_settings()")
    assert settings.returncode == 2 and settings.stderr.count("\n") == 1 and "the server's settings" in settings.stderr
