"""What a finished Dagster run says, read from its events: why it failed (the real error inside
Dagster's wrappers, or the blocking check), what it materialized, its steps' seconds, whether a
signal stopped it; and its whole event log written as text for the user."""

from __future__ import annotations

import contextlib
import logging
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from dagster import DagsterInstance


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


class RunLogError(RuntimeError):
    """A failed run whose log could not be written (a full disk, a read-only folder): one line with the
    run's failure and why its log is missing. Nothing of the run was published, and nothing already
    written is touched: the input log keeps the turns it holds for the next build."""


def failure_message(result) -> str:
    return _failure(result.all_events)


def _failure(events) -> str:
    # A failed blocking check fails the step that ran it: name the check, not Dagster's summary of it.
    events = list(events)
    for event in events:
        if event.event_type_value == "ASSET_CHECK_EVALUATION":
            data = event.event_specific_data
            if not data.passed:
                return f"check {data.check_name} failed on {data.asset_key.to_user_string()}"
    for event in events:
        if event.is_step_failure and event.step_failure_data and event.step_failure_data.error:
            return f"{event.step_key}: {_cause(event.step_failure_data.error)}"
    for event in events:  # before any step: resources (a setting in run config) or the run itself
        error = getattr(event.event_specific_data, "error", None)
        if event.event_type_value in ("RESOURCE_INIT_FAILURE", "RUN_FAILURE") and error is not None:
            return _cause(error)
    return "run failed"


def materialized(result) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for event in result.all_events:
        if event.event_type_value != "ASSET_MATERIALIZATION":
            continue
        materialization = event.event_specific_data.materialization
        numbers = {k: v.value for k, v in materialization.metadata.items()
                   if isinstance(getattr(v, "value", None), int | float) and not isinstance(v.value, bool)}
        out.setdefault(materialization.asset_key.to_user_string(), {}).update(numbers)
    return out


def interrupted(result) -> bool:
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
    Its first line names the conversation, so forgetting in it finds the log (``forgetting.sweep``).
    Raises RunLogError when the log cannot be written (no part of it is left behind)."""
    path = folder / f"{run_id}.log"
    lines = [f"# conversation {conversation_id}"]
    entries = instance.all_logs(run_id)
    for entry in entries:
        stamp = datetime.fromtimestamp(entry.timestamp, timezone.utc).isoformat(timespec="seconds")
        event = entry.dagster_event
        kind = event.event_type_value if event else "LOG"
        lines.append(f"{stamp} {logging.getLevelName(entry.level)} {entry.step_key or '-'} "
                     f"{kind} {entry.message or (event.message if event else '')}")
        error = getattr(event.event_specific_data, "error", None) if event else None
        if error is not None:
            lines.append(error.to_string())
    try:
        folder.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines) + "\n")
    except OSError as err:
        with contextlib.suppress(OSError):
            path.unlink(missing_ok=True)  # a part of a log would read as the whole of it
        why = _failure(e.dagster_event for e in entries if e.dagster_event is not None)
        raise RunLogError(f"the build of {conversation_id} failed: {why} (nothing of it was published; its log could not be "
                          f"written to {folder}: {err.strerror or type(err).__name__})") from None
    return path


def step_seconds(result) -> dict[str, float]:
    """Dagster step key -> the seconds of its successful run."""
    return {e.step_key: e.event_specific_data.duration_ms / 1000 for e in result.all_events
            if e.event_type_value == "STEP_SUCCESS" and e.event_specific_data is not None}
