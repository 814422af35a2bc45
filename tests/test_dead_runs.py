"""A build killed with ``kill -9`` leaves its Dagster run STARTED: nothing in the dead process can
report the end. The next command of the project finds the run's launcher (its ``seem/launcher`` tag:
host, pid and the pid's start time) gone and reports the run failed, naming it; a forget afterwards
deletes the run like any finished one, with no "forget again" warning.

A real `seem build` against a SQLite DAGSTER_HOME, killed by the fault injection (``SEEM_CRASH_AT``)
right after it wrote its passages table, mid-run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from dagster import DagsterInstance, DagsterRunStatus, RunsFilter

from conftest import message, seem_cli, tiny_job, write_jsonl
from seem_dagster import faults
from seem_dagster.defs import dead_runs
from seem_dagster.pipeline.stages import MEMORY_TABLES

pytestmark = pytest.mark.slow  # real builds through Dagster

SEEM = str(Path(sys.executable).parent / "seem")
CRASH = faults.table_point("passages", "after")
TURNS = [message(id="t1", text="I adopted a cat yesterday."), message(id="t2", speaker="Ben", text="What is her name?"),
         message(id="t3", text="We named her Miso, she is grey."), message(id="t4", speaker="Ben", text="Miso is a lovely name.")]


@pytest.fixture
def home(tmp_path) -> Path:
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    return home


def _env(home: Path, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEEM_")}
    return {**env, "DAGSTER_HOME": str(home), **extra}


def _runs(home: Path, partition: str = "c1"):
    with DagsterInstance.from_config(str(home)) as instance:
        return [(r.dagster_run, instance.all_logs(r.dagster_run.run_id))
                for r in instance.get_run_records(RunsFilter(tags={"dagster/partition": partition}), ascending=True)]


def test_a_build_killed_mid_run_is_reported_failed_by_the_next_command_and_forgets_cleanly(tmp_path, home):
    assert CRASH in faults.points(MEMORY_TABLES)
    chat, store = write_jsonl(tmp_path / "chat.jsonl", TURNS), tmp_path / "store"
    killed = subprocess.Popen([SEEM, "build", "--input", str(chat), "--store", str(store), "--quiet"], env=_env(home, SEEM_CRASH_AT=CRASH),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = killed.communicate(timeout=600)
    assert killed.returncode == -signal.SIGKILL, err[-3000:]

    # What the probe found: the dead build's run is "in progress", and stays so while nothing runs.
    ((run, _),) = _runs(home)
    assert run.status == DagsterRunStatus.STARTED
    assert dead_runs.launcher(run) == {"host": dead_runs.owner.host_tag(), "pid": killed.pid, "pid_start": dead_runs.launcher(run)["pid_start"]}

    started = time.perf_counter()
    again = seem_cli("build", "--input", str(chat), "--store", str(store), "--quiet", env=_env(home))
    build_s = time.perf_counter() - started
    assert again.returncode == 0, again.stderr[-3000:]
    (dead, dead_logs), (rebuilt, _) = _runs(home)
    assert dead.run_id == run.run_id and dead.status == DagsterRunStatus.FAILURE
    assert rebuilt.status == DagsterRunStatus.SUCCESS
    failure = [e for e in dead_logs if e.dagster_event and e.dagster_event.event_type_value == "PIPELINE_FAILURE"]
    assert len(failure) == 1 and f"process {killed.pid} " in failure[0].message and "no longer running" in failure[0].message, failure

    started = time.perf_counter()
    forgot = seem_cli("forget", "--conversation", "c1", "--turn", "t3", "--store", str(store), env=_env(home))
    forget_s = time.perf_counter() - started
    assert forgot.returncode == 0, forgot.stderr[-3000:]
    assert "forget again" not in forgot.stdout + forgot.stderr and "in progress" not in forgot.stdout + forgot.stderr
    assert forget_s < 60  # it did not wait for a run that will never end (defs.scrub waits up to 120 s for a live one)
    runs = _runs(home)
    assert run.run_id not in {r.run_id for r, _ in runs} and all(r.is_finished for r, _ in runs)
    print(f"\nthe build after the kill: {build_s:.1f} s; the forget: {forget_s:.1f} s")


def test_a_run_whose_launcher_lives_or_is_on_another_host_is_left_alone(home):
    tiny = tiny_job()
    with DagsterInstance.from_config(str(home)) as instance:
        sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        try:
            live, elsewhere, gone = (instance.create_run_for_job(tiny, tags=tags) for tags in (
                {dead_runs.LAUNCHER_TAG: dead_runs.encode({**dead_runs.owner.me(), "pid": sleeper.pid,
                                                            "pid_start": dead_runs.owner._start_ticks(sleeper.pid)})},
                {dead_runs.LAUNCHER_TAG: dead_runs.encode({"host": "elsewhere", "pid": 1, "pid_start": 1})},
                {dead_runs.LAUNCHER_TAG: dead_runs.encode({**dead_runs.owner.me(), "pid_start": -1})},  # this pid, another process
            ))
            for run in (live, elsewhere, gone):
                instance.report_dagster_event(_started(run), run_id=run.run_id)
            assert dead_runs.fail_dead_runs(instance) == [gone.run_id]
            assert [instance.get_run_by_id(r.run_id).status for r in (live, elsewhere, gone)] == [
                DagsterRunStatus.STARTED, DagsterRunStatus.STARTED, DagsterRunStatus.FAILURE]
            assert dead_runs.fail_dead_runs(instance) == []  # reported once
        finally:
            sleeper.kill()
            sleeper.wait()
        assert dead_runs.fail_dead_runs(instance) == [live.run_id]  # its launcher is gone now


def _started(run):
    from dagster._core.events import DagsterEvent, DagsterEventType

    return DagsterEvent(event_type_value=DagsterEventType.RUN_START.value, job_name=run.job_name)
