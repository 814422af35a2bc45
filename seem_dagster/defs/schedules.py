from dagster import RunRequest, ScheduleEvaluationContext, SkipReason, schedule

from seem_dagster.defs.jobs import build_memory
from seem_dagster.defs.partitions import conversations


@schedule(job=build_memory, cron_schedule="0 3 * * *", description="Nightly rebuild of every conversation's memory.")
def nightly_rebuild(context: ScheduleEvaluationContext):
    keys = context.instance.get_dynamic_partitions(conversations.name)
    if not keys:
        return SkipReason("no conversations yet")
    stamp = context.scheduled_execution_time.strftime("%Y-%m-%d")
    return [RunRequest(partition_key=key, run_key=f"rebuild:{stamp}:{key}") for key in keys]
