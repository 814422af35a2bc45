"""Materialize conversations through Dagster from Python (what `seem build` and `seem demo` call)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from dagster import DagsterInstance

from seem_dagster.defs.partitions import conversations


@dataclass(frozen=True)
class RunOutcome:
    conversation_id: str
    success: bool
    error: str | None
    run_id: str
    step_seconds: dict[str, float] | None = None  # Dagster step key -> duration of its successful run


def instance_for_cli() -> DagsterInstance:
    """The instance named by DAGSTER_HOME when set (runs show up in `dagster dev`), else an in-memory one."""
    if os.environ.get("DAGSTER_HOME"):
        return DagsterInstance.get()
    return DagsterInstance.ephemeral()


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


def build_conversations(
    defs,
    conversation_ids: Iterable[str],
    *,
    instance: DagsterInstance | None = None,
    progress: bool = False,
    job_name: str = "build_memory",
    log_level: str = "WARNING",
    run_config: dict | None = None,
) -> list[RunOutcome]:
    """``run_config`` goes to every run (e.g. ``{"resources": {"seem": {"config": {...}}}}``)."""
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
        )
        steps = {
            e.step_key: e.event_specific_data.duration_ms / 1000
            for e in result.all_events
            if e.event_type_value == "STEP_SUCCESS" and e.event_specific_data is not None
        }
        outcomes.append(RunOutcome(cid, result.success, None if result.success else _failure_message(result), result.run_id, steps))
    return outcomes
