"""Runs whose launcher died: reported failed, so that nothing waits for them and no one is told they are
still in progress.

A run the project launches (``defs.runner``) is executed by the launching process itself: in process,
or orchestrated from it when its steps go to subprocesses, Celery workers or pods. Killed with
``kill -9`` (or losing its machine), that process can record nothing, and the run stays STARTED in
the instance forever: the UI shows it in progress, a publish keeps its build for a day, a forget
waits for it and then asks to be run again. So each run carries its launcher in the tag
``LAUNCHER_TAG`` (host, pid and the pid's start time, ``store.owner``), and whoever reads a run's
status through this module reports an unfinished run failed once its launcher is known to be gone:
on the same host, the pid no longer running or running another program. A launcher on another host
is never judged (its liveness cannot be seen from here); runs without the tag (launched by the
Dagster daemon or the UI) and re-executions are left to Dagster's own run monitoring.
"""

from __future__ import annotations

from dagster import DagsterInstance, DagsterRunStatus, RunsFilter

from seem_dagster.store import owner

LAUNCHER_TAG = "seem/launcher"
# Every status of a run that has not finished and could be waiting on its launcher.
UNFINISHED = (DagsterRunStatus.NOT_STARTED, DagsterRunStatus.QUEUED, DagsterRunStatus.STARTING, DagsterRunStatus.STARTED,
              DagsterRunStatus.CANCELING)


def encode(record: dict) -> str:
    """``host:pid:pid_start`` (pid_start empty where /proc is not there)."""
    start = record.get("pid_start")
    return f"{record['host']}:{record['pid']}:{'' if start is None else start}"


def decode(value: str | None) -> dict | None:
    parts = (value or "").split(":")
    if len(parts) != 3 or not parts[1].isdigit():
        return None
    host, pid, start = parts
    try:
        return {"host": host, "pid": int(pid), "pid_start": int(start) if start else None}
    except ValueError:
        return None


def launcher_tags() -> dict[str, str]:
    """The tag naming this process as a run's launcher."""
    return {LAUNCHER_TAG: encode(owner.me())}


def launcher(run) -> dict | None:
    """The run's launcher as ``owner.me()`` recorded it, or None for a run without the tag."""
    return decode((run.tags or {}).get(LAUNCHER_TAG))


def is_dead(run) -> bool:
    """An unfinished run whose launcher is known to be gone (never True for another host's launcher).
    A re-execution (from the UI, a retry) may carry its parent's tags but is launched by Dagster, not
    by the process they name: it is never judged here."""
    record = launcher(run)
    return (run.status in UNFINISHED and run.parent_run_id is None and record is not None
            and owner.alive(record) is False)


def _message(record: dict) -> str:
    return (f"its launcher, process {record['pid']} on host {record['host']} ({LAUNCHER_TAG}), is no longer running: the process "
            f"was killed (kill -9, a lost machine) before the run ended; reported failed by process {owner.me()['pid']}. "
            "Nothing of the run was published; build the conversation again")


def fail_if_dead(instance: DagsterInstance, run) -> bool:
    """Report ``run`` failed when its launcher is gone. True when the run is (now) finished that way."""
    if not is_dead(run):
        return False
    current = instance.get_run_by_id(run.run_id)  # another process may have just reported it
    if current is None or current.is_finished:
        return True
    if not is_dead(current):
        return False
    instance.report_run_failed(current, _message(launcher(current)))
    return True


def fail_dead_runs(instance: DagsterInstance, tags: dict[str, str] | None = None) -> list[str]:
    """Report failed every unfinished run (with ``tags``) whose launcher is gone. Returns their run ids."""
    if instance.is_ephemeral:
        return []  # its runs live and die with this process
    runs = instance.get_runs(RunsFilter(statuses=list(UNFINISHED), tags=tags or {}))
    return [run.run_id for run in runs if fail_if_dead(instance, run)]
