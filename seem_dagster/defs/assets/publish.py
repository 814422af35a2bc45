"""memory: the conversation's published memory, swapped in whole once every table of the run is written.

The last step of ``build_memory`` (and of ``query_memory``). It runs only when every table of the run
was written and every blocking check passed, and publishes them in one step (``store.builds``):
readers (`seem query`, the query job, evaluation, notebooks) follow the manifest, so they read the
previous memory until this step succeeds, whatever happens to the run before.
"""

import polars as pl
from dagster import AssetExecutionContext, MaterializeResult, MetadataValue, ResourceParam, asset

from seem_dagster import interrupts
from seem_dagster.config import SeemConfig
from seem_dagster.defs import dead_runs
from seem_dagster.defs.io_manager import build_chain
from seem_dagster.defs.metadata import markdown_table
from seem_dagster.defs.partitions import conversations
from seem_dagster.forgetting import tombstones
from seem_dagster.pipeline.stages import MEMORY_TABLES, QUERY_TABLES
from seem_dagster.store.builds import publish, staged_table
from seem_dagster.store.files import remove_tree
from seem_dagster.store.snapshot import build_folder, read_table


def run_state(instance):
    """``run_state(build id)`` for ``store.builds.publish``: True while that build's run is live, False
    once it finished or its launcher was killed (then reported failed: ``dead_runs``), None for no run."""
    def state(run_id: str) -> bool | None:
        run = instance.get_run_by_id(run_id)
        if run is None:
            return None
        return not (run.is_finished or dead_runs.fail_if_dead(instance, run))

    return state


def _refuse_forgotten(root, partition: str, chain: list[str]) -> None:
    """A build that read its input before a forget of some of its turns must not publish them: its
    tables are removed (they hold the turns) and the step fails; the next build reads without them."""
    stones = tombstones.read(root, partition)
    path = staged_table(root, partition, chain, "passages") if stones else None
    if path is None:
        return
    forgotten = int(stones.forgotten(read_table(path)).sum())
    if forgotten:
        for build in chain:
            remove_tree(build_folder(root, partition, build))
        raise RuntimeError(f"{forgotten} turns this build read were forgotten while it ran: nothing published, its tables "
                           "removed; build the conversation again")


@asset(
    partitions_def=conversations,
    deps=[*MEMORY_TABLES, *QUERY_TABLES],
    group_name="memory",
    kinds={"json"},
    description="The published memory: a manifest naming every table of the conversation's last complete build. "
    "Materializing it publishes what this run wrote (after every blocking check passed) in one step; readers "
    "follow the manifest, so they never see a build that is running, failed or was killed half-way.",
)
def memory(context: AssetExecutionContext, seem: ResourceParam[SeemConfig]):
    chain = build_chain(context.run, context.instance)
    for partition in context.partition_keys:
        interrupts.stop_if_received(f"{partition} was not published")
        _refuse_forgotten(seem.store.root, partition, chain)
        with interrupts.deferred():  # a signal now takes effect once the manifest is written, not half-way
            done = publish(seem.store.root, partition, chain, MEMORY_TABLES, optional=QUERY_TABLES,
                           run_state=run_state(context.instance))
        context.log.info(f"{partition}: published build {chain[0][:8]} ({', '.join(done.staged)}); "
                         f"removed {len(done.removed_builds)} old or abandoned builds")
    tables = done.manifest["tables"]
    source = done.manifest.get("source") or {}
    return MaterializeResult(metadata={
        "published_build": MetadataValue.text(done.manifest["build_id"]),
        "previous_build": MetadataValue.text(done.previous_build or "none"),
        "tables": MetadataValue.md(markdown_table(pl.DataFrame(
            [(a, e["build_id"], e.get("fingerprint")) for a, e in tables.items()], schema=["table", "build", "fingerprint"], orient="row",
        ), rows=len(tables))),
        "written_by_this_run": MetadataValue.text(", ".join(done.staged)),
        "kept_from_the_previous_memory": MetadataValue.text(", ".join(done.carried) or "none"),
        "dropped_query_results": MetadataValue.text(", ".join(done.dropped) or "none"),
        "removed_builds": MetadataValue.int(len(done.removed_builds)),
        "removed_files": MetadataValue.int(done.removed_files),
        "source": MetadataValue.path(source.get("path") or "unknown"),
        "partitions_in_this_step": MetadataValue.int(len(context.partition_keys)),
    })
