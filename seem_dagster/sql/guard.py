"""What SQL may run: one SELECT (or WITH ... SELECT) statement, decided by DuckDB's own parser.

Everything else is refused with one line that says why: writes, DDL, ATTACH, COPY, INSTALL/LOAD,
PRAGMA, SET, a second statement after ``;``. The connection is locked down besides (no file access,
locked configuration: ``memory.py``), so a SELECT that tries to read a file fails there too, and
a data-modifying CTE (``WITH d AS (DELETE ... RETURNING *) SELECT ...``, which the parser types as a
SELECT) fails at binding: the views are over Arrow data, and there is no base table to write.
"""

from __future__ import annotations

import re


class SqlRefused(ValueError):
    """The SQL was refused or failed: the message is one line meant for the person or agent that sent it."""


# DuckDB's statement types, as a person would name what was tried.
_WHAT = {
    "INSERT": "a write (INSERT)", "UPDATE": "a write (UPDATE)", "DELETE": "a write (DELETE)", "MERGE_INTO": "a write (MERGE)",
    "CREATE": "DDL (CREATE)", "CREATE_FUNC": "DDL (CREATE MACRO/FUNCTION)", "DROP": "DDL (DROP)", "ALTER": "DDL (ALTER)",
    "ATTACH": "ATTACH (opening another database)", "DETACH": "DETACH", "COPY": "COPY (reading or writing files)",
    "COPY_DATABASE": "COPY DATABASE", "EXPORT": "EXPORT DATABASE (writing files)", "LOAD": "INSTALL/LOAD (extensions)",
    "EXTENSION": "an extension statement", "PRAGMA": "PRAGMA", "SET": "SET (changing settings)",
    "VARIABLE_SET": "SET VARIABLE", "TRANSACTION": "a transaction statement", "PREPARE": "PREPARE", "EXECUTE": "EXECUTE",
    "CALL": "CALL", "VACUUM": "VACUUM", "ANALYZE": "ANALYZE", "EXPLAIN": "EXPLAIN", "MULTI": "PIVOT/UNPIVOT as a statement",
}


def check_sql(con, sql: str, max_chars: int, views: frozenset[str] = frozenset()) -> str:
    """The statement to run, or SqlRefused. ``con`` is a DuckDB connection (its parser decides);
    ``views``: the tables a query may name (the memory's views; its own CTEs besides)."""
    import duckdb

    from seem_dagster.ingest.errors import text_problem

    if not isinstance(sql, str) or not sql.strip():
        raise SqlRefused("no SQL given: send one SELECT statement")
    if text_problem(sql) is not None:
        raise SqlRefused(f"the SQL is no text: {text_problem(sql)}")
    if len(sql) > max_chars:
        raise SqlRefused(f"SQL of {len(sql)} characters is over the limit of {max_chars} (sql.max_chars)")
    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as err:
        raise SqlRefused(f"SQL does not parse: {first_line(err)}") from None
    if not statements:
        raise SqlRefused("no SQL statement given (only comments or ';'): send one SELECT statement")
    if len(statements) > 1:
        raise SqlRefused(f"only one statement may run; got {len(statements)} (a ';' followed by another statement)")
    kind = statements[0].type.name
    if kind != "SELECT":
        raise SqlRefused(f"refused {_WHAT.get(kind, kind)}: the memory is read-only, only one SELECT or WITH ... SELECT runs")
    called = functions_called(con, sql)
    dynamic = sorted(called & DYNAMIC_SQL)
    if dynamic:
        raise SqlRefused(f"refused {dynamic[0]}(): SQL made from text as the query runs cannot be checked; write it out instead")
    server = sorted(called & SERVER_FUNCTIONS)
    if server:
        raise SqlRefused(f"refused {server[0]}(): the server's settings are not part of the memory")
    if SHOW_SETTING in called:
        raise SqlRefused("refused SHOW of a setting: the server's settings are not part of the memory")
    other = sorted(name[len(TABLE_FUNCTION):] for name in called if name.startswith(TABLE_FUNCTION)
                   and name[len(TABLE_FUNCTION):] not in TABLE_FUNCTIONS)
    if other:
        raise SqlRefused(f"refused {other[0]}(): a query reads the memory's views; the table functions offered are "
                         f"{', '.join(sorted(TABLE_FUNCTIONS))}")
    ctes = {name[len(CTE):] for name in called if name.startswith(CTE)}
    # A WITH name is in scope only where it is defined: one that is also a system view's would let the
    # view itself through elsewhere in the query (``(WITH pg_settings AS ...), pg_settings``).
    taken = sorted(ctes & (catalog_names(con) - views)) or sorted(c for c in ctes if not re.fullmatch(r"[^\W\d]\w*", c))
    if taken:
        raise SqlRefused(f"refused WITH {taken[0][:80]!r}: a WITH table's name is a plain word, not one of DuckDB's own "
                         "views (in another scope the name would read the view, or a file)")
    for name in sorted(n[len(BASE_TABLE):] for n in called if n.startswith(BASE_TABLE)):
        catalog, schema, table = name.split("\x00")
        own = table in views and catalog in ("", "temp") and schema in ("", "main")
        if not own and not (table in ctes and not catalog and not schema):
            shown = ".".join(p for p in (catalog, schema, table) if p)
            raise SqlRefused(f"refused {shown[:80]!r}: a query reads the memory's views ({', '.join(sorted(views)) or 'none'}) "
                             "and its own WITH tables, nothing else (no system view, file or variable)")
    return sql


# The table functions (FROM f(...)) a query may call: generators and the catalog of the memory's own
# views. Every other (files, settings, SQL run from text, extensions' scans) is refused by name, so a
# function a newer DuckDB adds is refused until it is looked at.
TABLE_FUNCTIONS = frozenset({
    "range", "generate_series", "unnest", "test_all_types", "properties_on", "duckdb_tables", "duckdb_views",
    "duckdb_columns", "duckdb_functions", "duckdb_types", "duckdb_keywords", "duckdb_schemas", "duckdb_macros",
    "duckdb_constraints", "duckdb_indexes", "duckdb_sequences", "duckdb_dependencies",
})
TABLE_FUNCTION = " table "  # the prefix ``functions_called`` gives a FROM-clause function's name


# Functions that show the server's configuration (its folders, once, among the allowed paths), and the
# system macro that calls one of them.
SERVER_FUNCTIONS = frozenset({"current_setting", "duckdb_settings", "duckdb_profiling_settings"})
# Table functions that run SQL, or read a table, named by text (built with || at run time, it is out of
# the check's reach), and the system macro that calls one.
DYNAMIC_SQL = frozenset({"query", "query_table", "json_execute_serialized_sql", "histogram_values"})
SHOW_SETTING = " show setting"  # what ``functions_called`` reports for ``SHOW name`` (DESCRIBE, SUMMARIZE stay)
# What ``functions_called`` reports for a table named in FROM ("catalog\0schema\0name", lower case; a
# system view such as pg_settings is one, and runs the functions refused above) and for a WITH name.
BASE_TABLE, CTE = " base ", " cte "


def catalog_names(con) -> set[str]:
    """The names of every table and view the connection's catalog holds, DuckDB's own included (lower case)."""
    rows = con.execute("SELECT view_name FROM duckdb_views() UNION SELECT table_name FROM duckdb_tables()").fetchall()
    return {str(name).lower() for (name,) in rows}


def functions_called(con, sql: str) -> set[str]:
    """Every function a SELECT names (scalar, aggregate, table; a table function also as
    ``TABLE_FUNCTION + name``), lower case, as DuckDB's own parser reads it (``json_serialize_sql``).
    A statement it cannot write out is refused: what it calls cannot be known."""
    import json

    try:
        tree = json.loads(con.execute("SELECT json_serialize_sql(?)", [sql]).fetchall()[0][0])
    except RecursionError:  # DuckDB's parser allows more depth than Python's JSON reader
        raise SqlRefused("refused: the SQL is nested too deeply to be checked") from None
    if tree.get("error"):
        raise SqlRefused(f"refused: this SELECT cannot be checked ({str(tree.get('error_message', ''))[:120]}); write it plainly")
    names: set[str] = set()
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            name = node.get("function_name")
            if isinstance(name, str):
                names.add(name.lower())
            if node.get("type") == "SHOW_REF" and node.get("show_type") == "SHOW":
                names.add(SHOW_SETTING)
            if node.get("type") == "TABLE_FUNCTION" and isinstance(node.get("function"), dict):
                names.add(TABLE_FUNCTION + str(node["function"].get("function_name", "")).lower())
            if node.get("type") == "BASE_TABLE":
                names.add(BASE_TABLE + "\x00".join(str(node.get(k) or "").lower() for k in ("catalog_name", "schema_name", "table_name")))
            if isinstance(node.get("cte_map"), dict):
                names |= {CTE + str(entry.get("key", "")).lower() for entry in node["cte_map"].get("map", []) if isinstance(entry, dict)}
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return names


def first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__
