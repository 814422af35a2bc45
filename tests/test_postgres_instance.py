"""The Dagster instance on a real PostgreSQL server (Debian's, started by ``tests/postgres_server.py``
on loopback): the Celery build runs through it, and a forget leaves no trace of the forgotten words in
the database, neither in what ``pg_dump`` reads nor in the database's files on disk, where PostgreSQL
keeps a deleted row's bytes until VACUUM FULL rewrites the table (``defs.instance_storage``).

The project's Dagster metadata never holds the conversations' words (``defs.metadata``); a run's log
can (a step's log line or error message quoting a turn). Here such a line is written into the build's
event log as an engine event, so that there is something for the forget to remove.
"""

from __future__ import annotations

import os
import time

import pytest
from dagster import DagsterInstance, RunsFilter

from conftest import files_under, seem_cli, tiny_job, write_jsonl
from seem_dagster.defs import instance_storage
from tests import postgres_server
from tests.postgres_server import dagster_yaml

pytestmark = pytest.mark.slow  # a real server, builds through Dagster

CANARY = "vorpelisk"
CID = "nadia"
TURNS = [{"conversation_id": CID, "session_id": "s1", "timestamp": f"2024-05-04T10:0{i}:00", "speaker": speaker, "text": text, "id": f"n{i}"}
         for i, (speaker, text) in enumerate([
             ("Nadia", "I started learning the cello in April."),
             ("Omar", "How are the lessons going?"),
             ("Nadia", f"My teacher lent me her old {CANARY} bow for the recital."),
             ("Omar", "When is the recital?"),
             ("Nadia", "It is in June, at the library hall."),
         ])]
FORGOTTEN = "n2"


@pytest.fixture(scope="module")
def postgres():
    pytest.importorskip("dagster_postgres", reason="dagster-postgres is in the dev extra: pip install -e '.[dev]'")
    reason = postgres_server.missing_reason()
    if reason:
        pytest.skip(reason)
    server = postgres_server.start_server()
    print(f"\nPostgreSQL {server.bin.parent.name}: initdb and start {server.started_s:.1f} s")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_home(postgres, tmp_path, monkeypatch):
    """A DAGSTER_HOME whose runs, events and schedules are in a new database of the server."""
    database = postgres.create_database()
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(dagster_yaml(postgres.url(database)))
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    return home, database


def _holds(postgres, database: str) -> tuple[bool, list[str]]:
    """Whether pg_dump's output holds the canary, and the database's files that do."""
    return CANARY.encode() in postgres.pg_dump(database).lower(), postgres.files_holding(database, CANARY.encode())


def _quote_canary_in_log(instance: DagsterInstance, run_id: str) -> None:
    instance.report_engine_event(f"a step's log line quoting a turn: 'her old {CANARY} bow'", instance.get_run_by_id(run_id))


# dagster-celery registers its task on the launcher's app once per run; Celery warns on the repeats.
@pytest.mark.filterwarnings("ignore:Task name 'execute_plan' is already registered")
def test_the_celery_build_runs_through_a_postgresql_instance(postgres, redis_broker, tmp_path, monkeypatch):
    pytest.importorskip("dagster_celery", reason="dagster-celery is in the dev extra: pip install -e '.[dev]'")
    from tests.test_celery import build_on_celery

    database = postgres.create_database()
    done = build_on_celery(redis_broker, tmp_path, monkeypatch, dagster_yaml(postgres.url(database)))
    with DagsterInstance.get() as instance:
        assert instance_storage.kind(instance) == instance_storage.POSTGRES
    # The runs are rows of the server's database, not SQLite files under DAGSTER_HOME.
    assert sorted(r[0] for r in postgres.execute("SELECT run_id FROM runs", database)) == sorted(done["run_ids"])
    assert [p for p in files_under(tmp_path / "dagster_home") if p.suffix == ".db"] == []
    print(f"\nthree conversations on PostgreSQL: in process {done['in_process_s']:.1f} s, on two Celery workers {done['celery_s']:.1f} s")


def test_a_forget_leaves_the_forgotten_words_neither_in_pg_dump_nor_in_the_database_files(postgres, pg_home, tmp_path):
    from seem_dagster import Memory

    home, database = pg_home
    store = tmp_path / "store"
    started = time.perf_counter()
    with Memory.open(store) as memory:
        (added,) = memory.add_file(write_jsonl(tmp_path / "nadia.jsonl", TURNS))
        assert added.status == "new" and added.passages == len(TURNS)
    build_s = time.perf_counter() - started
    with DagsterInstance.get() as instance:
        assert instance_storage.kind(instance) == instance_storage.POSTGRES
        (build,) = instance.get_run_records(RunsFilter(tags={"dagster/partition": CID}))
        _quote_canary_in_log(instance, build.dagster_run.run_id)
    dumped, files = _holds(postgres, database)
    assert dumped and files, "the canary should be in the database before the forget"

    started = time.perf_counter()
    forgot = seem_cli("forget", "--conversation", CID, "--turn", FORGOTTEN, "--store", str(store), env={**os.environ, "DAGSTER_HOME": str(home)})
    forget_s = time.perf_counter() - started
    assert forgot.returncode == 0, forgot.stderr[-3000:]
    assert "warning" not in forgot.stderr, forgot.stderr  # no storage it could not compact
    assert _holds(postgres, database) == (False, [])
    with DagsterInstance.get() as instance:
        runs = instance.get_run_records(RunsFilter(tags={"dagster/partition": CID}))
        assert build.dagster_run.run_id not in {r.dagster_run.run_id for r in runs} and len(runs) == 1  # the rebuild's run stays
    with Memory.open(store) as memory:
        assert FORGOTTEN not in {h.source_ref for h in memory.search(CID, "Whose bow did Nadia borrow?", k=10)}
    assert [p for p in files_under(home) if p.suffix == ".db"] == []  # nothing of the instance in SQLite files
    print(f"\nbuild {build_s:.1f} s; `seem forget` (rebuild, scrub, VACUUM FULL) {forget_s:.1f} s")


def test_deleted_runs_stay_in_the_database_files_until_compact_rewrites_them(postgres, pg_home):
    """Why the scrub compacts: a deleted run's rows are out of every query at once (pg_dump), but their
    bytes stay in the table's files as dead tuples until VACUUM FULL."""
    tiny = tiny_job()
    _, database = pg_home
    with DagsterInstance.get() as instance:
        run_id = tiny.execute_in_process(instance=instance).run_id
        _quote_canary_in_log(instance, run_id)
        assert _holds(postgres, database)[0]
        instance.delete_run(run_id)
        dumped, files = _holds(postgres, database)
        assert not dumped and files, files  # deleted, and still on disk
        started = time.perf_counter()
        assert instance_storage.compact(instance) == []
        compact_s = time.perf_counter() - started
    assert _holds(postgres, database) == (False, [])
    print(f"\ncompact (VACUUM FULL of {len(instance_storage.RUN_TABLES) + len(instance_storage.EVENT_LOG_TABLES)} tables): {compact_s:.2f} s")


def test_compact_as_a_role_that_may_not_vacuum_the_tables_says_so_in_one_line(postgres, pg_home, tmp_path):
    """PostgreSQL skips a table its role may not VACUUM with a notice, not an error: compact asks first."""
    _, database = pg_home
    DagsterInstance.get().dispose()  # the tables, made by their owner
    postgres.execute("CREATE ROLE seem_guest LOGIN")
    postgres.execute("GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO seem_guest", database)
    postgres.execute("GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO seem_guest", database)
    guest = tmp_path / "guest_home"
    guest.mkdir()
    (guest / "dagster.yaml").write_text(dagster_yaml(postgres.url(database).replace("postgres@", "seem_guest@")))
    with DagsterInstance.from_config(str(guest)) as instance:
        warnings = instance_storage.compact(instance)
    assert len(warnings) == 2 and all("\n" not in w and "may not VACUUM" in w and "VACUUM FULL" in w for w in warnings), warnings
    assert "run_tags, runs:" in warnings[0] and "event_logs" in warnings[1]


def test_sqlite_instances_are_vacuumed_where_they_keep_their_files(tmp_path):
    """The SQLite side of compact, with the storage folders outside DAGSTER_HOME."""
    home, elsewhere = tmp_path / "home", tmp_path / "elsewhere"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\nstorage:\n  sqlite:\n"
                                       f"    base_dir: {elsewhere}\n")
    with DagsterInstance.from_config(str(home)) as instance:
        assert instance_storage.kind(instance) == instance_storage.SQLITE
        files = instance_storage._sqlite_files(instance)
        assert files and all(elsewhere in p.parents for p in files)
        assert instance_storage.compact(instance) == []
    with DagsterInstance.ephemeral() as memory:
        assert instance_storage.kind(memory) == instance_storage.MEMORY and instance_storage.compact(memory) == []
