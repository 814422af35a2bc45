"""What a forget removes from the Dagster instance: the conversation's earlier runs.

Materialization metadata carries no words of the conversations (``defs.metadata``), but a run keeps
more than its metadata: the log lines and error messages of its steps, in the event log and in the
captured compute logs. A forget deletes every run of the conversation's partition but the one that
published the memory without the forgotten turns (run record, event log, compute logs), and then
compacts the instance's storage (``instance_storage.compact``: VACUUM of its SQLite files, VACUUM FULL
of its PostgreSQL tables), since neither gives deleted rows' bytes back by itself. With a whole
conversation forgotten, its partition and its assets' history of that partition go too.

A run still in progress is waited for (``WAIT_FOR_RUNS_S``) and then left, with a warning; a run whose
launcher was killed never ends, so it is reported failed (``dead_runs``) and deleted like any other.

Runs over several partitions at once (a backfill run of ``extract_frames``) are not deleted: they
are other conversations' history too, and their metadata holds counts and ids only.
"""

from __future__ import annotations

import time

from dagster import AssetKey, DagsterInstance, RunsFilter

from seem_dagster.defs import dead_runs, instance_storage
from seem_dagster.defs.partitions import conversations
from seem_dagster.pipeline.stages import MEMORY_TABLES, QUERY_TABLES

PARTITION_TAG = "dagster/partition"
WAIT_FOR_RUNS_S = 120.0  # a run of the conversation still in progress is waited for this long, then reported


def delete_runs(instance: DagsterInstance, conversation_id: str, keep: set[str] = frozenset(), *,
                whole: bool = False, wait_s: float = WAIT_FOR_RUNS_S) -> tuple[int, list[str]]:
    """Delete the conversation's runs but ``keep``; with ``whole``, its partition and asset history too.
    Returns (runs deleted, warnings)."""
    warnings: list[str] = []
    deadline = time.monotonic() + wait_s
    while True:
        records = instance.get_run_records(RunsFilter(tags={PARTITION_TAG: conversation_id}))
        running = [r.dagster_run.run_id for r in records if r.dagster_run.run_id not in keep and not r.dagster_run.is_finished
                   and not dead_runs.fail_if_dead(instance, r.dagster_run)]
        if not running or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    deleted = 0
    for record in records:
        run_id = record.dagster_run.run_id
        if run_id in keep or run_id in running:
            continue
        instance.delete_run(run_id)
        try:
            instance.compute_log_manager.delete_logs(prefix=[run_id])
        except (NotImplementedError, AttributeError, OSError):
            pass  # a manager without stored logs (in-memory instances)
        deleted += 1
    if running:
        warnings.append(f"{len(running)} run(s) of {conversation_id} were still in progress ({', '.join(r[:8] for r in running)}): "
                        "their records stay; forget again once they end")
    if whole:
        for asset in (*MEMORY_TABLES, *QUERY_TABLES, "memory"):
            try:
                instance.wipe_asset_partitions(AssetKey(asset), [conversation_id])
            except Exception:  # noqa: BLE001 - an asset this instance never materialized for it
                pass
        if instance.has_dynamic_partition(conversations.name, conversation_id):
            instance.delete_dynamic_partition(conversations.name, conversation_id)
    warnings += vacuum(instance)
    return deleted, warnings


def vacuum(instance: DagsterInstance) -> list[str]:
    """Make the instance's storage give back deleted rows' bytes (``instance_storage.compact``). Returns warnings."""
    return instance_storage.compact(instance)
