"""The nightly rebuild: every conversation whose memory a build would change.

A conversation is rebuilt when its input file changed, a registration waits for its build, its
published memory is missing or mixed, or a setting or code version of a stage differs from the
code location's (``registry.why_rebuild``, ``registry.inputs_changed``), or appends published
commits on its memory since its last build (the build folds them into a fresh base: compaction). The others would be rebuilt
into the same memory, at seconds a run: they are skipped, and the tick's log says how many and why
the rest run. To rebuild everything regardless, launch a backfill of all partitions.
"""

from dagster import ResourceParam, RunRequest, ScheduleEvaluationContext, SkipReason, schedule

from seem_dagster.config import SeemConfig
from seem_dagster.defs.jobs import build_memory
from seem_dagster.defs.partitions import conversations
from seem_dagster.registry import inputs_changed, why_rebuild
from seem_dagster.store.commits import commits_of
from seem_dagster.store.manifest import read_manifest


@schedule(job=build_memory, cron_schedule="0 3 * * *",
          description="Nightly rebuild of every conversation whose input, settings or code changed since its memory was built, "
          "or whose memory took append commits since (compaction).")
def nightly_rebuild(context: ScheduleEvaluationContext, seem: ResourceParam[SeemConfig]):
    keys = context.instance.get_dynamic_partitions(conversations.name)
    if not keys:
        return SkipReason("no conversations yet")
    root = seem.store.root
    changed = inputs_changed(root, keys)
    reasons = {}
    for key in keys:
        reason = changed.get(key) or why_rebuild(root, key, seem) or _appended(root, key)
        if reason is not None:
            reasons[key] = reason
            context.log.info(f"{key}: rebuilt ({reason})")
    if not reasons:
        return SkipReason(f"all {len(keys)} conversations' memories are current")
    context.log.info(f"{len(reasons)} of {len(keys)} conversations to rebuild; {len(keys) - len(reasons)} current, skipped")
    stamp = context.scheduled_execution_time.strftime("%Y-%m-%d")
    return [RunRequest(partition_key=key, run_key=f"rebuild:{stamp}:{key}") for key in keys if key in reasons]


def _appended(root, key: str) -> str | None:
    count = len(commits_of(read_manifest(root, key)))
    return f"{count} append commit(s) to fold into a fresh base" if count else None
