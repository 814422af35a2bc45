"""SQL results Python cannot hold as they are: a date or timestamp outside years 1-9999 (DuckDB's
infinity, year 5877642), at any depth of lists, structs and maps, comes back as DuckDB's text for it,
in every format, where polars would panic (a BaseException that took a whole MCP server process
down for every tenant); dates Python can hold stay dates."""

from __future__ import annotations

from datetime import date

import polars as pl
import pytest

from seem_dagster.config import SqlConfig
from seem_dagster.sql.memory import Loaded, SqlMemory
from seem_dagster.sql.output import FORMATS, as_records, render

BEYOND = ("SELECT 'infinity'::DATE AS d, '-infinity'::TIMESTAMP AS ts, [DATE '5877642-06-25'] AS l, "
          "{'a': TIMESTAMP '294247-01-10 04:00:54'} AS s, map([DATE 'infinity'], [1]) AS m, DATE '2024-01-01' AS ok, "
          "TIMESTAMP '9999-12-31 23:59:59' AS edge")


@pytest.fixture(scope="module")
def memory():
    with SqlMemory(Loaded({"passages": pl.DataFrame({"text": ["hi"]})}, ["c1"]), SqlConfig(memory_limit_mb=64)) as held:
        yield held


def test_dates_beyond_python_come_back_as_text_and_the_rest_as_dates(memory):
    result = memory.query(BEYOND)
    row = result.frame.rows(named=True)[0]  # panicked before
    assert row["d"] == "infinity" and row["ts"] == "-infinity" and "5877642-06-25" in row["l"] and "294247" in row["s"]
    assert "infinity" in row["m"] and row["ok"] == date(2024, 1, 1) and row["edge"].year == 9999
    assert result.types[0] == "DATE"  # the type it had, as for every value given as text
    assert as_records(result)["rows"][0]["d"] == "infinity"
    for fmt in FORMATS:
        assert "infinity" in render(result, fmt, 100)


@pytest.mark.parametrize("sql", ["SELECT {'a': INTERVAL 1 DAY} AS s", "SELECT MAP {'a': INTERVAL 1 DAY} AS s",
                                 "SELECT {'a': [INTERVAL 1 DAY]} AS s", "SELECT {'a': union_value(k := 1)} AS s",
                                 "SELECT [{'a': union_value(k := 1)}] AS s"])
def test_types_polars_cannot_take_at_any_depth_come_back_as_text(memory, sql):
    row = memory.query(sql).frame.rows()[0]  # panicked in pl.from_arrow before
    assert isinstance(row[0], str)


def test_a_table_of_every_type_renders(memory):
    result = memory.query("SELECT * FROM test_all_types()")
    assert result.frame.height == 3 and len(result.frame.to_dicts()) == 3
    for fmt in FORMATS:
        render(result, fmt, 100)


def test_a_panic_inside_a_tool_is_an_error_of_that_call_alone():
    from seem_dagster.agent.mcp_server import Panicked, _contained

    def panics():  # a real polars panic: a date past year 9999 turned into Python
        return pl.Series([2_147_483_647]).cast(pl.Int32).cast(pl.Date).to_list()

    with pytest.raises(Panicked):
        _contained(panics)
    assert _contained(lambda: 7) == 7
    with pytest.raises(KeyboardInterrupt):  # other BaseExceptions still stop the server
        _contained(lambda: (_ for _ in ()).throw(KeyboardInterrupt()))
