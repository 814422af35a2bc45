"""The memory as DuckDB views: one consistent snapshot per conversation, in an in-memory database
that can read nothing else.

Each table of a conversation's memory is read through the snapshot store's reading API (one
consistent build per conversation) and registered as a view named after the table; with several
conversations the views hold all of them (``conversation_id`` tells them apart). The connection is
locked before any user SQL runs: external access (files, URLs, extensions) off, Python replacement
scans off, the configuration locked. A query runs under a row cap and a time limit.

DuckDB lets even a connection without external access read and list its temp directory (it is in
``allowed_directories``): with spilling on, one tenant's ``glob('.tmp/**')`` and ``read_blob`` read
another's spill files. So nothing spills (``temp_directory`` empty: a query past ``memory_limit``
fails with an out-of-memory error), and every folder DuckDB would name (home, secrets, extensions)
is the worker's own empty folder, its working directory (``pool.Worker``), named relatively. The
settings themselves (``current_setting``, ``duckdb_settings``) are refused by ``sql.guard``: they are
the server's, not the memory's, and ``allowed_paths`` names the working folder.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import polars as pl

from seem_dagster.config import SqlConfig
from seem_dagster.sql.guard import SqlRefused, check_sql, first_line
from seem_dagster.store.snapshot import SnapshotError, read_snapshot
from seem_dagster.store.sources import registered_conversations

# Every table of a built memory, in the order `--schema` lists them.
TABLES = ("passages", "questions", "event_frames", "facts", "properties", "episodes", "entities", "graph_edges",
          "retrieval_index", "llm_calls")
CONVERSATION = "conversation_id"
# DuckDB types returned as their text: no output format (and not polars) holds them as they are.
AS_TEXT = frozenset({"VARIANT", "UNION", "BIT", "INTERVAL", "UUID", "GEOMETRY", "BLOB", "BIGNUM", "VARINT"})
# "What held on a date" as a table macro over the properties view (stored ends: as known now).
MACROS = {
    "properties_on": ("properties_on(day)", "CREATE MACRO properties_on(day) AS TABLE SELECT * FROM properties "
                      "WHERE valid_from <= CAST(day AS TIMESTAMP) AND (valid_to IS NULL OR valid_to > CAST(day AS TIMESTAMP))"),
}


@dataclass
class SqlResult:
    frame: pl.DataFrame
    types: list[str]
    truncated: bool
    seconds: float
    skipped: dict[str, str] = field(default_factory=dict)  # conversations left out of the views, each with why


@dataclass
class Loaded:
    tables: dict[str, pl.DataFrame]
    conversations: list[str]
    skipped: dict[str, str] = field(default_factory=dict)  # conversation -> why it is not in the views


def load_tables(store, conversations: str | Sequence[str] | None = None) -> Loaded:
    """The tables of one conversation (``conversations`` a string: its error is raised), of a list of
    them, or of every built conversation (None); each conversation's from one build. A conversation
    of a list, or of all, without a readable memory is left out and named in ``skipped``."""
    strict = isinstance(conversations, str)
    wanted = [conversations] if strict else list(conversations) if conversations is not None else registered_conversations(store)
    per_table: dict[str, list[pl.DataFrame]] = {t: [] for t in TABLES}
    loaded, skipped = [], {}
    for cid in wanted:
        try:
            tables = read_snapshot(store, cid, TABLES)
        except SnapshotError as err:
            if strict:
                raise
            skipped[cid] = str(err)
            continue
        loaded.append(cid)
        for name, frame in tables.items():
            if CONVERSATION not in frame.columns:
                frame = frame.select(pl.lit(cid).alias(CONVERSATION), pl.all())
            per_table[name].append(frame)
    if not loaded:
        why = f" ({'; '.join(f'{c}: {r}' for c, r in list(skipped.items())[:3])})" if skipped and conversations is None else ""
        raise SnapshotError(f"no built conversation in the store {store}{why}: build one with `seem build`")
    return Loaded({name: pl.concat(frames, how="vertical") for name, frames in per_table.items()}, loaded, skipped)


class SqlMemory:
    """Read-only SQL over loaded tables. Not thread-safe: one query at a time per instance."""

    def __init__(self, loaded: Loaded, config: SqlConfig):
        import duckdb

        self.config = config
        self.conversations = loaded.conversations
        self.skipped = loaded.skipped
        # Relative to the working directory, the worker's private empty folder: no setting or error names a path.
        self.con = duckdb.connect(":memory:", config={
            "autoload_known_extensions": False, "autoinstall_known_extensions": False,
            "python_enable_replacements": False, "threads": config.threads, "memory_limit": f"{config.memory_limit_mb}MB",
            "temp_directory": "", "allow_persistent_secrets": False, "home_directory": ".",
            "secret_directory": "./secrets", "extension_directory": "./extensions",
        })
        # DuckDB allows the database's own files (":memory:", ":memory:.wal", ... under the working folder,
        # by their absolute paths): readable by any query, and shown by SHOW allowed_paths. The list can
        # only be emptied while external access is on, so it is emptied first, before any SQL of a caller.
        self.con.execute("SET allowed_paths = []")
        self.con.execute("SET enable_external_access = false")
        self.tables = loaded.tables
        for name, frame in loaded.tables.items():
            self.con.register(name, frame.to_arrow())
        self.macros = {name: sig for name, (sig, create) in MACROS.items() if "properties" in self.tables}
        for name in self.macros:
            self.con.execute(MACROS[name][1])
        self.con.execute("SET enable_progress_bar = false")  # it writes to the terminal, and the SQL worker's stdout is its protocol
        self.con.execute("SET lock_configuration = true")

    @classmethod
    def open(cls, store, conversation_id: str | None, config: SqlConfig) -> SqlMemory:
        return cls(load_tables(store, conversation_id), config)

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> SqlMemory:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def schema(self) -> dict[str, list[tuple[str, str]]]:
        """view -> [(column, DuckDB type)], in TABLES order."""
        out = {}
        for name in self.tables:
            rel = self.con.table(name)
            out[name] = [(c, str(t)) for c, t in zip(rel.columns, rel.types)]
        return out

    def describe(self) -> dict:
        """What an agent or a person needs to write a query: views, columns, row counts, the macros."""
        return {
            "conversations": self.conversations,
            "views": {name: {"rows": self.tables[name].height, "columns": dict(cols)} for name, cols in self.schema().items()},
            "macros": self.macros,
            "limits": {"max_rows": self.config.max_rows, "timeout_s": self.config.timeout_s},
        }

    def query(self, sql: str) -> SqlResult:
        """Run one SELECT; SqlRefused (one line) for anything refused, failing or over the time limit."""
        import duckdb
        import pyarrow as pa

        sql = check_sql(self.con, sql, self.config.max_chars, frozenset(name.lower() for name in self.tables))
        timer = threading.Timer(self.config.timeout_s, self.con.interrupt)
        started = time.perf_counter()
        timer.start()
        try:
            rel = self.con.sql(sql)
            if rel is None:  # pragma: no cover (the guard lets only queries through)
                raise SqlRefused("the statement returned no rows: only one SELECT runs")
            types = [str(t) for t in rel.types]
            # at any depth: polars panics on an interval or a union inside a struct, a list or a map
            odd = [c for c, t in zip(rel.columns, types) if AS_TEXT & set(re.findall(r"[A-Z]+", t))]
            if odd:  # types a table, CSV or JSON cannot hold as they are: their text (the type stays in ``types``)
                rel = rel.project(", ".join(f"CAST({_quoted(c)} AS VARCHAR) AS {_quoted(c)}" if c in odd else _quoted(c)
                                            for c in rel.columns))
            table = rel.limit(self.config.max_rows + 1).to_arrow_table()
        except pa.ArrowException as err:  # a value Arrow cannot carry (a struct nested past its limit): one line
            raise SqlRefused(f"the result cannot be returned: {first_line(err)}") from None
        except duckdb.InterruptException:
            raise SqlRefused(f"query stopped after the time limit of {self.config.timeout_s:g} s (sql.timeout_s)") from None
        except duckdb.PermissionException as err:
            raise SqlRefused(f"refused: {first_line(err)} (the memory's views are all a query can read)") from None
        except duckdb.Error as err:
            raise SqlRefused(f"SQL error: {first_line(err)}") from None
        finally:
            timer.cancel()
        beyond = [name for name in table.column_names if beyond_python_dates(table.column(name))]
        if beyond:  # polars cannot give such values to Python (it panics): their text, as DuckDB writes it
            table = self.con.from_arrow(table).project(", ".join(
                f"CAST({_quoted(c)} AS VARCHAR) AS {_quoted(c)}" if c in beyond else _quoted(c) for c in table.column_names)).to_arrow_table()
        seconds = time.perf_counter() - started
        try:
            frame = pl.from_arrow(table)
        except BaseException as err:  # polars panics (a BaseException) on an Arrow type it does not take
            if type(err).__name__ != "PanicException":
                raise
            raise SqlRefused(f"the result holds a type that cannot be returned: {first_line(err)[:160]}; cast it to text") from None
        truncated = frame.height > self.config.max_rows
        return SqlResult(frame.head(self.config.max_rows), types, truncated, seconds, dict(self.skipped))


# Python's dates run from year 1 to 9999: the bounds of a date32 (days) and of a timestamp per unit.
_FIRST, _LAST = -719_162, 2_932_896  # 0001-01-01 and 9999-12-31, in days from 1970-01-01
_PER_DAY = {"s": 86_400, "ms": 86_400_000, "us": 86_400_000_000, "ns": 86_400_000_000_000}


def beyond_python_dates(values) -> bool:
    """Whether an Arrow array (or chunked array) holds a date or timestamp, at any depth of lists and
    structs, outside years 1-9999 (DuckDB's infinity, year 294247): polars panics turning it into Python."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = values.type
    if pa.types.is_date32(kind) or pa.types.is_timestamp(kind):
        if len(values) == values.null_count:
            return False
        unit = 1 if pa.types.is_date32(kind) else _PER_DAY[kind.unit]
        physical = values.cast(pa.int32() if pa.types.is_date32(kind) else pa.int64())
        low, high = pc.min_max(physical).values()
        return (low.as_py() is not None and (low.as_py() < _FIRST * unit or high.as_py() >= (_LAST + 1) * unit))
    chunks = values.chunks if isinstance(values, pa.ChunkedArray) else [values]
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        return any(beyond_python_dates(chunk.flatten()) for chunk in chunks)
    if pa.types.is_struct(kind):
        return any(beyond_python_dates(chunk.field(i)) for chunk in chunks for i in range(kind.num_fields))
    if pa.types.is_map(kind):
        return any(beyond_python_dates(chunk.keys) or beyond_python_dates(chunk.items) for chunk in chunks)
    return False


def _quoted(column: str) -> str:
    return '"' + column.replace('"', '""') + '"'
