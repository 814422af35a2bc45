"""Materialize conversations through Dagster from Python (what `seem build`, `seem demo` and `seem eval` call)."""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from dagster import DagsterInstance

from seem_dagster import interrupts
from seem_dagster.defs.partitions import conversations


@dataclass(frozen=True)
class RunOutcome:
    conversation_id: str
    success: bool
    error: str | None
    run_id: str
    step_seconds: dict[str, float] | None = None  # Dagster step key -> duration of its successful run
    log_path: str | None = None  # a failed run's whole event log, stack traces included


def instance_for_cli() -> DagsterInstance:
    """The instance named by DAGSTER_HOME when set (runs show up in `dagster dev`), else an in-memory one."""
    if os.environ.get("DAGSTER_HOME"):
        return DagsterInstance.get()
    return DagsterInstance.ephemeral()


def default_log_dir(store: str | None = None) -> Path:
    """``<store>/_logs`` for a local store, else a folder in the system's temp dir."""
    if store and "://" not in store:
        return Path(store) / "_logs"
    return Path(tempfile.gettempdir()) / "seem-dagster-logs"


# How Dagster's own errors around the real one begin (loading an input, running the op, a resource).
DAGSTER_WRAPPERS = ("dagster._core.errors.", "Error occurred while", "Error executing resource_fn")


def _cause(err) -> str:
    """The real error inside Dagster's wrappers, as its last line."""
    while err.cause is not None and err.message.startswith(DAGSTER_WRAPPERS):
        err = err.cause
    text = err.message.strip()
    return text.splitlines()[-1] if text else err.cls_name


def _failure_message(result) -> str:
    for event in result.all_events:
        if event.is_step_failure and event.step_failure_data and event.step_failure_data.error:
            return f"{event.step_key}: {_cause(event.step_failure_data.error)}"
    for event in result.all_events:
        if event.event_type_value == "ASSET_CHECK_EVALUATION":
            data = event.event_specific_data
            if not data.passed:
                return f"check {data.check_name} failed on {data.asset_key.to_user_string()}"
    for event in result.all_events:  # before any step: resources (a setting in run config) or the run itself
        error = getattr(event.event_specific_data, "error", None)
        if event.event_type_value in ("RESOURCE_INIT_FAILURE", "RUN_FAILURE") and error is not None:
            return _cause(error)
    return "run failed"


def _interrupted(result) -> bool:
    """Whether the run stopped because the process got SIGINT or SIGTERM."""
    for event in result.all_events:
        error = getattr(event.event_specific_data, "error", None)
        while error is not None:
            if "Interrupt" in (error.cls_name or ""):
                return True
            error = error.cause
    return False


def write_run_log(instance: DagsterInstance, run_id: str, folder: Path) -> Path:
    """The run's event log as text, every error with its stack trace: what the console no longer prints."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{run_id}.log"
    lines = []
    for entry in instance.all_logs(run_id):
        stamp = datetime.fromtimestamp(entry.timestamp, timezone.utc).isoformat(timespec="seconds")
        event = entry.dagster_event
        kind = event.event_type_value if event else "LOG"
        lines.append(f"{stamp} {logging.getLevelName(entry.level)} {entry.step_key or '-'} "
                     f"{kind} {entry.message or (event.message if event else '')}")
        error = getattr(event.event_specific_data, "error", None) if event else None
        if error is not None:
            lines.append(error.to_string())
    path.write_text("\n".join(lines) + "\n")
    return path


def build_conversations(
    defs,
    conversation_ids: Iterable[str],
    *,
    instance: DagsterInstance | None = None,
    progress: bool = False,
    job_name: str = "build_memory",
    log_level: str = "CRITICAL",
    run_config: dict | None = None,
    log_dir: str | os.PathLike | None = None,
    tags: dict[str, dict[str, str]] | None = None,
) -> list[RunOutcome]:
    """One run per conversation. ``run_config`` goes to every run (e.g. ``{"resources": {"seem":
    {"config": {...}}}}``); ``tags``: per conversation. The console gets Dagster's logs from
    ``log_level`` up (default: none); a failed run's whole log goes to ``log_dir`` instead.

    Raises ``interrupts.Interrupted`` when the process got SIGINT or SIGTERM (``interrupts.install``):
    the run it stopped published nothing, and no further conversation is started.
    """
    instance = instance or instance_for_cli()
    ids = list(conversation_ids)
    known = set(instance.get_dynamic_partitions(conversations.name))
    new = [c for c in ids if c not in known]
    if new:
        instance.add_dynamic_partitions(conversations.name, new)
    job = defs.resolve_job_def(job_name)
    iterator = ids
    if progress:
        from tqdm import tqdm

        iterator = tqdm(ids, desc="building", unit="conversation")
    outcomes = []
    for cid in iterator:
        result = job.execute_in_process(
            instance=instance,
            partition_key=cid,
            raise_on_error=False,
            run_config={"loggers": {"console": {"config": {"log_level": log_level}}}, **(run_config or {})},
            tags=(tags or {}).get(cid),
        )
        if not result.success and _interrupted(result):
            signum = interrupts.received(wait=2.0)
            if signum is not None:
                done = sum(o.success for o in outcomes)
                raise interrupts.Interrupted(signum, f"the build of {cid} was stopped and nothing of it was published "
                                                     f"(its memory is the last complete build); {done} of {len(ids)} conversations built")
        steps = {
            e.step_key: e.event_specific_data.duration_ms / 1000
            for e in result.all_events
            if e.event_type_value == "STEP_SUCCESS" and e.event_specific_data is not None
        }
        log_path = None
        if not result.success:
            log_path = str(write_run_log(instance, result.run_id, Path(log_dir) if log_dir else default_log_dir()))
        outcomes.append(RunOutcome(cid, result.success, None if result.success else _failure_message(result), result.run_id, steps,
                                   log_path))
    return outcomes
