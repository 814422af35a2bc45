"""What a Dagster instance keeps its runs and event log in, and how to make that storage give back the
bytes of rows a forget deleted (``compact``): the one place that knows each kind of storage.

A deleted row is not gone from the disk at once. SQLite leaves its bytes in free pages until the file
is rewritten (VACUUM; a checkpoint first, so the write-ahead log is folded in and truncated).
PostgreSQL leaves the row as a dead tuple in its table's pages: a plain VACUUM only marks the space
reusable, so ``compact`` runs VACUUM FULL, which writes each table (its TOAST table and indexes too)
into new files and truncates the old ones. VACUUM FULL holds an exclusive lock on the table while it
runs: on a large instance a forget pauses other runs' event writes for that long (``LOCK_TIMEOUT``
bounds the wait for the lock, not the rewrite). PostgreSQL's write-ahead log and any replica or backup
keep what they were sent; they are the operators' to retire.

Anything else (an in-memory instance keeps nothing; MySQL, a hosted instance) is reported, not
touched.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from dagster import DagsterInstance

MEMORY, SQLITE, POSTGRES, OTHER = "memory", "sqlite", "postgres", "other"

# The tables a scrub deletes rows from or rewrites (``defs.scrub``): a run's record and tags; its events,
# the asset and check rows that point at them, the dynamic partition and the concurrency rows of its steps.
RUN_TABLES = ("runs", "run_tags")
EVENT_LOG_TABLES = ("event_logs", "asset_keys", "asset_event_tags", "asset_check_executions", "dynamic_partitions",
                    "pending_steps", "concurrency_slots")
LOCK_TIMEOUT = "60s"  # how long VACUUM FULL waits for a table a long transaction holds, then gives up (a warning)


def storage_kind(storage) -> str:
    """The kind of one run, event-log or schedule storage, by its class (no import of dagster-postgres)."""
    cls = type(storage)
    module, name = cls.__module__, cls.__name__
    if name.startswith("InMemory"):
        return MEMORY
    if module.startswith("dagster_postgres."):
        return POSTGRES
    if module.startswith("dagster._core.storage.") and name.startswith(("Sqlite", "ConsolidatedSqlite")):
        return SQLITE
    return OTHER


def kind(instance: DagsterInstance) -> str:
    """Where the instance keeps its runs and their event logs: memory, sqlite, postgres or other (also
    when the two are of different kinds)."""
    if instance.is_ephemeral:
        return MEMORY
    kinds = {storage_kind(instance.run_storage), storage_kind(instance.event_log_storage)}
    return kinds.pop() if len(kinds) == 1 else OTHER


def compact(instance: DagsterInstance) -> list[str]:
    """Rewrite the instance's run and event-log storage so that deleted rows leave no bytes on its disk.
    Returns warnings: a storage it could not compact, and why."""
    if instance.is_ephemeral:
        return []
    roles = {"runs": instance.run_storage, "event log": instance.event_log_storage}
    kinds = {role: storage_kind(storage) for role, storage in roles.items()}
    warnings: list[str] = []
    if SQLITE in kinds.values() or storage_kind(instance.schedule_storage) == SQLITE:
        warnings += _vacuum_sqlite(instance)
    done: set[str] = set()
    for role, storage in roles.items():
        if kinds[role] == POSTGRES:
            tables = RUN_TABLES if role == "runs" else EVENT_LOG_TABLES
            warnings += _vacuum_full_postgres(storage, tables, done)
    others = [role for role, k in kinds.items() if k == OTHER]
    if others:
        warnings.append(f"the Dagster instance keeps its {' and '.join(others)} in {type(roles[others[0]]).__name__}, which this "
                        "project cannot compact: run its storage's own compaction (e.g. VACUUM) so deleted runs leave no bytes in it")
    return warnings


def _sqlite_files(instance: DagsterInstance) -> list[Path]:
    """Every SQLite file of the instance: under its root folder, and in its storages' own folders."""
    folders = {Path(instance.root_directory)}
    for storage in (instance.run_storage, instance.event_log_storage, instance.schedule_storage):
        if storage_kind(storage) != SQLITE:
            continue
        base = getattr(storage, "_base_dir", None)  # the event log's folder of per-run files
        conn = getattr(storage, "_conn_string", None)  # sqlite:////path/to/runs.db
        if base:
            folders.add(Path(base))
        elif isinstance(conn, str) and conn.startswith("sqlite:///"):
            folders.add(Path(conn[len("sqlite:///"):]).parent)
    return sorted({p for folder in folders if folder.is_dir() for p in folder.rglob("*.db") if p.is_file()})


def _vacuum_sqlite(instance: DagsterInstance) -> list[str]:
    warnings = []
    for path in _sqlite_files(instance):
        try:
            con = sqlite3.connect(path, timeout=30)
            try:
                con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                con.execute("VACUUM")
            finally:
                con.close()
        except sqlite3.Error as err:
            warnings.append(f"could not VACUUM {path} ({err}): deleted runs' bytes stay in its free pages until it is vacuumed")
    return warnings


# The tables (of those asked) that the connected role may not VACUUM: PostgreSQL skips them with a
# notice, not an error. Owners, the database's owner and superusers may; from PostgreSQL 17, MAINTAIN.
_NOT_VACUUMABLE = """
SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = current_schema() AND c.relkind = 'r' AND c.relname = ANY(:tables)
  AND NOT (pg_has_role(current_user, c.relowner, 'USAGE')
           OR pg_has_role(current_user, (SELECT datdba FROM pg_database WHERE datname = current_database()), 'USAGE')
           OR (SELECT rolsuper FROM pg_roles WHERE rolname = current_user){maintain})
"""


def _vacuum_full_postgres(storage, tables: tuple[str, ...], done: set[str]) -> list[str]:
    """VACUUM FULL each of ``tables`` that the storage's database has (``done``: "<url> <table>" already
    compacted, when run and event-log storage share a database)."""
    import sqlalchemy as sa

    url = str(getattr(storage, "postgres_url", "") or id(storage))
    left = "deleted runs' rows stay in its files until it is vacuumed (VACUUM FULL, as the tables' owner)"
    warnings = []
    try:
        # SQL run storages open connections with connect(), SQL event logs with index_connection()
        with (storage.index_connection() if hasattr(storage, "index_connection") else storage.connect()) as conn:
            conn = conn.execution_options(isolation_level="AUTOCOMMIT")  # VACUUM cannot run inside a transaction
            todo = [t for t in tables if t in set(sa.inspect(conn).get_table_names()) and f"{url} {t}" not in done]
            version = int(conn.execute(sa.text("SHOW server_version_num")).scalar())
            maintain = "\n           OR has_table_privilege(c.oid, 'MAINTAIN')" if version >= 170000 else ""
            refused = {r[0] for r in conn.execute(sa.text(_NOT_VACUUMABLE.format(maintain=maintain)), {"tables": todo})}
            if refused:
                warnings.append(f"the Dagster database's role may not VACUUM {', '.join(sorted(refused))}: {left}")
            conn.execute(sa.text(f"SET lock_timeout = '{LOCK_TIMEOUT}'"))
            for table in (t for t in todo if t not in refused):
                try:
                    conn.execute(sa.text(f'VACUUM FULL "{table}"'))
                    done.add(f"{url} {table}")
                except sa.exc.DBAPIError as err:
                    conn.rollback()  # no transaction on the server (autocommit); SQLAlchemy's own state only
                    reason = str(getattr(err, "orig", err)).strip().splitlines()[0]
                    warnings.append(f"could not VACUUM FULL the Dagster table {table} ({reason}): {left}")
    except Exception as err:  # noqa: BLE001 - a database it cannot reach (dagster-postgres raises its own after retries)
        cause = err.__cause__ or err
        reason = str(getattr(cause, "orig", cause)).strip().splitlines()[0] if str(cause).strip() else type(cause).__name__
        warnings.append(f"could not reach the Dagster database to VACUUM FULL it ({reason}): {left}")
    return warnings
