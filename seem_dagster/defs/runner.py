"""Materialize conversations through Dagster from Python (what `seem build`, `seem demo` and `seem eval` call):
one run per conversation, in this process or through a reconstructable job (``launch``), each run's
outcome read from its events (``run_events``)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from dagster import DagsterInstance

from seem_dagster import interrupts
from seem_dagster.config import Resolved
from seem_dagster.defs import dead_runs
from seem_dagster.defs.io_manager import IN_PROCESS_EXECUTORS
from seem_dagster.defs.partitions import conversations
from seem_dagster.defs.run_events import default_log_dir, failure_message, interrupted, materialized, step_seconds, write_run_log


@dataclass(frozen=True)
class RunOutcome:
    conversation_id: str
    success: bool
    error: str | None
    run_id: str
    step_seconds: dict[str, float] | None = None  # Dagster step key -> duration of its successful run
    log_path: str | None = None  # a failed run's whole event log, stack traces included
    # asset -> its materialization's numeric metadata (rows, extracted, cache hits, ...), as the UI shows it
    materialized: dict[str, dict[str, float]] | None = None


# An in-memory instance keeps every run's events (about 0.4 MB a run): a build of thousands of
# conversations would grow without bound, so a build without a persistent instance starts a new
# in-memory one after this many runs. No run reads another's events: the tables are in the store.
RUNS_PER_EPHEMERAL_INSTANCE = 64


def instance_for_cli() -> DagsterInstance:
    """The instance named by DAGSTER_HOME when set (runs show up in `dagster dev`), else an in-memory one."""
    if os.environ.get("DAGSTER_HOME"):
        return DagsterInstance.get()
    return DagsterInstance.ephemeral()


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
    config: Resolved | None = None,
) -> list[RunOutcome]:
    """One run per conversation. ``run_config`` goes to every run (e.g. ``{"resources": {"seem":
    {"config": {...}}}}``); ``tags``: per conversation. The console gets Dagster's logs from
    ``log_level`` up (default: none); a failed run's whole log goes to ``log_dir`` instead.

    The job's executor (``execution.executor``) decides where the steps run. In process, the job is
    executed here; otherwise through a reconstructable job (``assemble.launched_defs``) on a
    persistent instance, each step process resolving ``config`` (the settings ``defs`` were built
    with; default: the standard resolution) and each run carrying its per-run settings.

    Raises ``interrupts.Interrupted`` when the process got SIGINT or SIGTERM (``interrupts.install``):
    the run it stopped published nothing, and no further conversation is started.
    """
    job = defs.resolve_job_def(job_name)
    executor = job.executor_def.name
    with contextlib.ExitStack() as stack:
        recon = None
        if executor not in IN_PROCESS_EXECUTORS:
            from seem_dagster.config import resolve_standard
            from seem_dagster.defs import launch

            config = config or resolve_standard()
            instance = launch.out_of_process_instance(instance, executor, stack)
            stack.enter_context(launch.launched(config))
            run_config = launch.merge(launch.per_run_settings(config), run_config or {})
            recon = launch.reconstructable(job.name)
        ids = list(conversation_ids)
        renew = DagsterInstance.ephemeral if instance is None and recon is None and not os.environ.get("DAGSTER_HOME") else None
        return _run_each(job, recon, ids, instance=instance or instance_for_cli(), renew=renew, progress=progress,
                         log_level=log_level, run_config=run_config, log_dir=log_dir, tags=tags)


def _add_partitions(instance: DagsterInstance, ids: list[str]) -> None:
    known = set(instance.get_dynamic_partitions(conversations.name))
    new = [c for c in ids if c not in known]
    if new:
        instance.add_dynamic_partitions(conversations.name, new)


def _run_each(job, recon, ids: list[str], *, instance, progress, log_level, run_config, log_dir, tags, renew=None) -> list[RunOutcome]:
    """``renew``: makes the in-memory instance that replaces ``instance`` every RUNS_PER_EPHEMERAL_INSTANCE runs.
    Each run is tagged with this process as its launcher; runs of earlier launchers killed meanwhile
    are reported failed first (``dead_runs``)."""
    dead_runs.fail_dead_runs(instance)
    _add_partitions(instance, ids)
    iterator = ids
    if progress:
        from tqdm import tqdm

        iterator = tqdm(ids, desc="building", unit="conversation")
    outcomes = []
    for position, cid in enumerate(iterator):
        interrupts.stop_if_received(f"stopped before the build of {cid}; {sum(o.success for o in outcomes)} of {len(ids)} "
                                    "conversations built")  # a signal swallowed between two runs
        config = {"loggers": {"console": {"config": {"log_level": log_level}}}, **(run_config or {})}
        if renew is not None and position and position % RUNS_PER_EPHEMERAL_INSTANCE == 0:
            instance = renew()
            _add_partitions(instance, ids[position:])
        if recon is None:
            result = job.execute_in_process(instance=instance, partition_key=cid, raise_on_error=False, run_config=config,
                                            tags={**dead_runs.launcher_tags(), **((tags or {}).get(cid) or {})})
        else:
            from dagster import execute_job

            result = execute_job(recon, instance, run_config=config,
                                 tags={**dead_runs.launcher_tags(), **((tags or {}).get(cid) or {}), "dagster/partition": cid},
                                 raise_on_error=False)
        if not result.success and interrupted(result):
            signum = interrupts.received(wait=2.0)
            if signum is not None:
                done = sum(o.success for o in outcomes)
                raise interrupts.Interrupted(signum, f"the build of {cid} was stopped and nothing of it was published "
                                                     f"(its memory is the last complete build); {done} of {len(ids)} conversations built")
        log_path = None
        if not result.success:
            log_path = str(write_run_log(instance, result.run_id, Path(log_dir) if log_dir else default_log_dir(), cid))
        outcomes.append(RunOutcome(cid, result.success, None if result.success else failure_message(result), result.run_id,
                                   step_seconds(result), log_path, materialized(result)))
    return outcomes
