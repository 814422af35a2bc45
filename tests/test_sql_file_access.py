"""SQL reads no file: not the temp folder DuckDB always allows (it spilled one tenant's rows where
another's glob('.tmp/**') and read_blob read them), not the working folder, and no path-taking
function of duckdb_functions() reaches a planted canary; introspection names no server folder."""

from __future__ import annotations

import polars as pl
import pytest

from seem_dagster.config import SqlConfig
from seem_dagster.sql.guard import SqlRefused
from seem_dagster.sql.memory import Loaded, SqlMemory

CANARY = "glimmerquox"
PATH_FUNCTIONS = ["glob", "read_blob", "read_text", "read_csv", "read_csv_auto", "read_json", "read_json_auto", "read_ndjson",
                  "read_json_objects", "read_parquet", "parquet_scan", "parquet_metadata", "parquet_schema", "parquet_file_metadata",
                  "parquet_kv_metadata", "sniff_csv", "read_duckdb"]


@pytest.fixture
def planted(tmp_path, monkeypatch):
    home = tmp_path / "home"
    for folder in (tmp_path, tmp_path / ".tmp", home):
        folder.mkdir(exist_ok=True)
        (folder / "secret.csv").write_text(f"word\n{CANARY}\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(home))
    with SqlMemory(Loaded({"passages": pl.DataFrame({"text": ["hi"]})}, ["c1"]), SqlConfig(memory_limit_mb=64)) as memory:
        yield memory, tmp_path, home


def test_no_path_taking_function_reads_a_planted_file(planted):
    memory, root, home = planted
    names = {r[0] for r in memory.con.execute("SELECT DISTINCT function_name FROM duckdb_functions()").fetchall()}
    assert {"glob", "read_blob", "read_text"} <= names
    paths = [".tmp/secret.csv", ".tmp/*", ".tmp/**", "secret.csv", "**", str(root / ".tmp" / "secret.csv"), str(home / "secret.csv")]
    for function in [f for f in PATH_FUNCTIONS if f in names]:
        for path in paths:
            try:
                result = memory.query(f"SELECT * FROM {function}('{path}')")
            except SqlRefused as err:
                assert CANARY not in str(err)
                continue
            assert CANARY not in str(result.frame.to_dicts()), (function, path)
            assert result.frame.height == 0, (function, path, result.frame)


def test_introspection_names_no_folder_of_the_server(planted):
    memory, root, home = planted
    for sql in ["SELECT name, value FROM duckdb_settings()", "SELECT current_setting('home_directory') AS h",
                "SELECT * FROM (SELECT \"CURRENT_SETTING\"('allowed_paths') AS p)", "SELECT count(*) FROM main.duckdb_settings()"]:
        with pytest.raises(SqlRefused, match=r"refused (current_setting|duckdb_settings)\(\): the server's settings"):
            memory.query(sql)
    for sql in ["SHOW allowed_paths", "SELECT * FROM (SHOW allowed_paths)", "SELECT unnest(allowed_paths) FROM (SHOW \"allowed_paths\")"]:
        with pytest.raises(SqlRefused, match="refused SHOW of a setting"):
            memory.query(sql)
    assert memory.query("SELECT * FROM (DESCRIBE passages)").frame.height == 1  # describing the memory's views stays
    for sql in ["SELECT * FROM histogram_values('pass' || 'ages', text)", "SELECT * FROM duckdb_profiling_settings()"]:
        with pytest.raises(SqlRefused, match="refused"):
            memory.query(sql)
    for sql in ["SELECT name, value FROM query('SELECT * FROM duck' || 'db_settings()')", "SELECT * FROM query_table('passages')",
                "SELECT * FROM query('SELECT current_setting(''home_directory'') AS h')"]:
        with pytest.raises(SqlRefused, match=r"refused query(_table)?\(\): SQL made from text"):
            memory.query(sql)
    for sql in ["SELECT * FROM duckdb_extensions()", "SELECT * FROM duckdb_temporary_files()", "SELECT * FROM duckdb_databases()"]:
        try:
            text = str(memory.query(sql).frame.to_dicts())
        except SqlRefused as err:
            text = str(err)
        assert str(root) not in text and str(home) not in text and "/tmp" not in text, (sql, text)
    # What the settings are (read past the guard, as the server would): nothing spills, no folder is allowed.
    settings = dict(memory.con.execute("SELECT name, value FROM duckdb_settings()").fetchall())
    assert settings["temp_directory"] == "" and settings["allowed_directories"] == "[]"
    assert settings["home_directory"] == "." and str(home) not in str(settings)
    assert settings["allowed_paths"] == "[]" and "/" not in str(settings.get("allowed_paths"))


def test_the_databases_own_file_names_read_nothing(planted):
    """DuckDB allowed ':memory:', ':memory:.wal', ... under the working folder by default: planted there,
    they were readable by any query, and an error on them named the folder."""
    memory, root, _ = planted
    for name in (":memory:", ":memory:.wal", ":memory:.wal.checkpoint", ":memory:.wal.recovery"):
        (root / name).write_text(f"word\n{CANARY}\n")
        for sql in [f"SELECT * FROM read_text('{name}')", f"SELECT * FROM read_blob('{name}')", f"SELECT * FROM read_duckdb('{name}')"]:
            with pytest.raises(SqlRefused) as refused:
                memory.query(sql)
            assert CANARY not in str(refused.value) and str(root) not in str(refused.value)


def test_system_views_are_refused_and_the_memorys_own_views_and_ctes_read(planted):
    """DuckDB's system views (pg_settings runs duckdb_settings()) are tables by name, out of a function
    check's sight: a query names the memory's views and its own WITH tables, nothing else."""
    memory, _, _ = planted
    for sql in ["SELECT * FROM pg_settings", "SELECT * FROM pg_catalog.pg_settings", "SELECT * FROM system.main.duckdb_databases",
                "SELECT * FROM duckdb_logs", "SELECT * FROM pg_prepared_statements", "SELECT (SELECT setting FROM pg_settings LIMIT 1)",
                "WITH t AS (SELECT 1) SELECT * FROM t, other.main.passages",
                "SELECT * FROM (WITH pg_settings AS (SELECT 1 AS a) SELECT * FROM pg_settings), pg_settings",
                "SELECT * FROM (WITH \"x.csv\" AS (SELECT 1) SELECT 1) t, \"x.csv\"", "SELECT * FROM memory.main.passages"]:
        with pytest.raises(SqlRefused, match="and its own WITH tables, nothing else|a WITH table's name is a plain word"):
            memory.query(sql)
    assert memory.query("WITH t AS (SELECT text FROM main.passages) SELECT * FROM t, temp.main.passages p").frame.height == 1


@pytest.mark.parametrize("sql", ["SELECT 1" + "+1" * 499, "SELECT " + "NOT " * 500 + "true", "SELECT " + "[" * 63 + "1" + "]" * 63,
                                 "SELECT " + "{'a':" * 63 + "1" + "}" * 63, "SELECT '\ud800'"])
def test_sql_too_deep_or_no_text_is_refused_in_one_line(planted, sql):
    memory, _, _ = planted
    with pytest.raises(SqlRefused) as refused:
        memory.query(sql)
    assert "\n" not in str(refused.value)
