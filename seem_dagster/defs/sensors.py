"""The sensors: new or grown inbox files become partitions and runs; memories with many append
commits are compacted.

Inbox: schedules cannot add dynamic partitions; a sensor can. The cursor remembers each file's size
and modification time, so a file is read again only when it changes. A bad file is reported in the
sensor's log and retried only once it changes: it never blocks the others.

Compaction: a conversation whose memory took ``store.compact_commits`` append commits since its
build gets one run of the build job per base build (its run key names the base), which folds the
commits into a fresh base; appends made while it runs are carried onto that base
(``store.builds.publish``), so an agent writing meanwhile fails nothing. A run that fails leaves
the base to the nightly schedule (and an add past ``store.compact_after`` commits is a build).
"""


import json
from pathlib import Path

from dagster import ResourceParam, RunRequest, SensorEvaluationContext, SensorResult, SkipReason, sensor

from seem_dagster.config import SeemConfig
from seem_dagster.defs.jobs import build_memory
from seem_dagster.defs.partitions import conversations
from seem_dagster.ingest import InputError
from seem_dagster.registry import EMPTY, register_file, to_build
from seem_dagster.store.commits import commits_of
from seem_dagster.store.manifest import read_manifest

INPUT_SUFFIXES = (".json", ".jsonl")


def inbox_files(inbox: Path) -> list[Path]:
    if not inbox.is_dir():
        return []
    return sorted(p for p in inbox.iterdir() if p.is_file() and p.suffix in INPUT_SUFFIXES and not p.name.startswith("."))


@sensor(job=build_memory, minimum_interval_seconds=30, description="Turns new or grown files in the inbox into partitions and runs.")
def inbox_sensor(context: SensorEvaluationContext, seem: ResourceParam[SeemConfig]):
    inbox = Path(seem.store.inbox)
    cursor = json.loads(context.cursor) if context.cursor else {}
    existing = set(context.instance.get_dynamic_partitions(conversations.name))
    new_keys: list[str] = []
    runs: list[RunRequest] = []
    seen: dict[str, list[int]] = {}
    for path in inbox_files(inbox):
        stat = path.stat()
        state = [stat.st_size, stat.st_mtime_ns]
        seen[str(path)] = state
        if cursor.get(str(path)) == state:
            continue
        try:
            registered = register_file(seem.store.root, str(path), options=seem.ingest)
        except InputError as err:
            context.log.error(f"inbox file rejected, nothing registered: {err}")
            continue
        for reg in registered:
            for skipped in reg.skipped:
                context.log.warning(f"{path.name}: skipped (ingest.allow_empty_turns): {skipped}")
            if reg.status == EMPTY:
                context.log.warning(f"{path.name}: conversation {reg.conversation_id} skipped: every turn is empty, nothing to build")
        registered = to_build(registered)
        for reg in registered:
            if reg.conversation_id not in existing and reg.conversation_id not in new_keys:
                new_keys.append(reg.conversation_id)
            # (A registration already waiting had its run requested when it was first seen.)
            if (reg.status != "unchanged" and not reg.waiting) or reg.conversation_id not in existing:
                runs.append(
                    RunRequest(
                        partition_key=reg.conversation_id,
                        run_key=f"{reg.conversation_id}:{reg.fingerprint}",
                        tags={"seem/source": str(path)},
                    )
                )
        context.log.info(f"{path.name}: {len(registered)} conversations, {sum(r.status != 'unchanged' for r in registered)} new or changed")
    next_cursor = json.dumps(seen, sort_keys=True)
    if not runs and not new_keys:
        return SensorResult(skip_reason=SkipReason(f"no new or grown files in {inbox}"), cursor=next_cursor)
    return SensorResult(
        run_requests=runs,
        dynamic_partitions_requests=[conversations.build_add_request(new_keys)] if new_keys else [],
        cursor=next_cursor,
    )


@sensor(job=build_memory, minimum_interval_seconds=60,
        description="Compacts a conversation's memory once it took store.compact_commits append commits since its build.")
def compaction_sensor(context: SensorEvaluationContext, seem: ResourceParam[SeemConfig]):
    runs = []
    for key in context.instance.get_dynamic_partitions(conversations.name):
        manifest = read_manifest(seem.store.root, key)
        count = len(commits_of(manifest))
        if count >= seem.store.compact_commits:
            context.log.info(f"{key}: {count} append commits on build {manifest['build_id']}: compacting")
            runs.append(RunRequest(partition_key=key, run_key=f"compact:{key}:{manifest['build_id']}", tags={"seem/source": "compaction"}))
    if not runs:
        return SkipReason(f"no memory has {seem.store.compact_commits} append commits (store.compact_commits)")
    return runs
