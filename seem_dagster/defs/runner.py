"""Materialize conversations through Dagster from Python (what `seem build`, `seem demo` and `seem eval` call)."""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from dagster import DagsterInstance

from seem_dagster import interrupts
from seem_dagster.config import SETTINGS, ConfigError, Resolved
from seem_dagster.defs.io_manager import IN_PROCESS_EXECUTORS
from seem_dagster.defs.partitions import conversations


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
    # A failed blocking check fails the step that ran it: name the check, not Dagster's summary of it.
    for event in result.all_events:
        if event.event_type_value == "ASSET_CHECK_EVALUATION":
            data = event.event_specific_data
            if not data.passed:
                return f"check {data.check_name} failed on {data.asset_key.to_user_string()}"
    for event in result.all_events:
        if event.is_step_failure and event.step_failure_data and event.step_failure_data.error:
            return f"{event.step_key}: {_cause(event.step_failure_data.error)}"
    for event in result.all_events:  # before any step: resources (a setting in run config) or the run itself
        error = getattr(event.event_specific_data, "error", None)
        if event.event_type_value in ("RESOURCE_INIT_FAILURE", "RUN_FAILURE") and error is not None:
            return _cause(error)
    return "run failed"


def _materialized(result) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for event in result.all_events:
        if event.event_type_value != "ASSET_MATERIALIZATION":
            continue
        materialization = event.event_specific_data.materialization
        numbers = {k: v.value for k, v in materialization.metadata.items()
                   if isinstance(getattr(v, "value", None), int | float) and not isinstance(v.value, bool)}
        out.setdefault(materialization.asset_key.to_user_string(), {}).update(numbers)
    return out


def _interrupted(result) -> bool:
    """Whether the run stopped because the process got SIGINT or SIGTERM."""
    for event in result.all_events:
        error = getattr(event.event_specific_data, "error", None)
        while error is not None:
            if "Interrupt" in (error.cls_name or ""):
                return True
            error = error.cause
    return False


def write_run_log(instance: DagsterInstance, run_id: str, folder: Path, conversation_id: str) -> Path:
    """The run's event log as text, every error with its stack trace: what the console no longer prints.
    Its first line names the conversation, so forgetting in it finds the log (``forgetting.sweep``)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{run_id}.log"
    lines = [f"# conversation {conversation_id}"]
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


def per_run_settings(config: Resolved) -> dict:
    """The ``seem`` resource's run config holding every per-run setting that is not the default: an
    out-of-process step (a Celery worker started with other settings) computes with the launcher's."""
    from seem_dagster.defs.resources import NOT_PER_RUN

    sections: dict = {}
    for key in SETTINGS:
        if config.source(key) != "default" and not key.startswith(NOT_PER_RUN):
            section, name = key.split(".", 1)
            value = config.value(key)
            sections.setdefault(section, {})[name] = list(value) if isinstance(value, tuple) else value
    return {"resources": {"seem": {"config": sections}}} if sections else {}


@contextlib.contextmanager
def _launched(config: Resolved):
    """Step processes started meanwhile (multiprocess) resolve ``config`` (``assemble.launched_defs``)."""
    from seem_dagster.defs.assemble import launched_environment

    saved = {k: os.environ.get(k) for k in launched_environment(config)}
    os.environ.update(launched_environment(config))
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _out_of_process_instance(instance: DagsterInstance | None, executor: str, stack: contextlib.ExitStack) -> DagsterInstance:
    """Steps in other processes read and write the run through the instance's storage: it must be persistent.
    Without DAGSTER_HOME a multiprocess build gets a temporary instance, removed after the build."""
    if instance is not None and not instance.is_ephemeral:
        return instance
    if os.environ.get("DAGSTER_HOME"):
        return DagsterInstance.get()
    if executor != "multiprocess":
        raise ConfigError(f"execution.executor {executor!r}: set DAGSTER_HOME to the instance the workers share "
                          "(its run and event storage must be theirs too)")
    folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="seem-dagster-instance-"))
    return stack.enter_context(DagsterInstance.local_temp(folder))


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

    With ``config`` and the job in process, the next conversation's extraction runs in the background
    meanwhile (``extraction.prefetch``, ``pipeline.prefetch``); without ``config`` it does not.

    Raises ``interrupts.Interrupted`` when the process got SIGINT or SIGTERM (``interrupts.install``):
    the run it stopped published nothing, and no further conversation is started.
    """
    job = defs.resolve_job_def(job_name)
    executor = job.executor_def.name
    with contextlib.ExitStack() as stack:
        recon = None
        if executor not in IN_PROCESS_EXECUTORS:
            from dagster._core.definitions.reconstruct import ReconstructableRepository

            from seem_dagster.config import resolve_standard

            config = config or resolve_standard()
            instance = _out_of_process_instance(instance, executor, stack)
            stack.enter_context(_launched(config))
            run_config = _merge(per_run_settings(config), run_config or {})
            recon = ReconstructableRepository.for_module("seem_dagster.defs.assemble", "launched_defs", working_directory=os.getcwd())
        ids = list(conversation_ids)
        prefetch = _prefetch(config, ids) if recon is None else None
        try:
            renew = DagsterInstance.ephemeral if instance is None and recon is None and not os.environ.get("DAGSTER_HOME") else None
            outcomes = _run_each(job, recon, ids, instance=instance or instance_for_cli(), renew=renew, progress=progress,
                                 log_level=log_level, run_config=run_config, log_dir=log_dir, tags=tags, prefetch=prefetch)
        except BaseException:
            if prefetch is not None:
                prefetch.close(kill=True)
            raise
        if prefetch is not None:
            prefetch.close()
        return outcomes


def _prefetch(config: Resolved | None, ids: list[str]):
    """The next conversation's extraction in the background (``pipeline.prefetch``), when
    ``scheduling.should_prefetch`` says it can pay; ``config`` must be the settings the job was built
    with (the callers that build many conversations pass it)."""
    from seem_dagster.scheduling import should_prefetch

    if config is None or not should_prefetch(config.config, len(ids)):
        return None
    from seem_dagster.extraction.embedded import MODEL
    from seem_dagster.pipeline.prefetch import ExtractionPrefetch

    return ExtractionPrefetch(config.config.store.root, MODEL)


def _merge(base: dict, top: dict) -> dict:
    out = dict(base)
    for key, value in top.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def _add_partitions(instance: DagsterInstance, ids: list[str]) -> None:
    known = set(instance.get_dynamic_partitions(conversations.name))
    new = [c for c in ids if c not in known]
    if new:
        instance.add_dynamic_partitions(conversations.name, new)


def _run_each(job, recon, ids: list[str], *, instance, progress, log_level, run_config, log_dir, tags, prefetch=None,
              renew=None) -> list[RunOutcome]:
    """``renew``: makes the in-memory instance that replaces ``instance`` every RUNS_PER_EPHEMERAL_INSTANCE runs."""
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
        if prefetch is not None:
            prefetch.finish()  # this conversation's prefetch, if any, is in its extraction cache now
            if position + 1 < len(ids):
                prefetch.start(ids[position + 1])
        if recon is None:
            result = job.execute_in_process(instance=instance, partition_key=cid, raise_on_error=False, run_config=config,
                                            tags=(tags or {}).get(cid))
        else:
            from dagster import execute_job

            result = execute_job(recon.get_reconstructable_job(job.name), instance, run_config=config,
                                 tags={**((tags or {}).get(cid) or {}), "dagster/partition": cid}, raise_on_error=False)
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
            log_path = str(write_run_log(instance, result.run_id, Path(log_dir) if log_dir else default_log_dir(), cid))
        outcomes.append(RunOutcome(cid, result.success, None if result.success else _failure_message(result), result.run_id, steps,
                                   log_path, _materialized(result)))
    return outcomes
