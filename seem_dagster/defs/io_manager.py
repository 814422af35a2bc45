"""The snapshot IO manager: each run writes its own build, and reads it back before the published memory.

A table a run materializes goes to ``<store>/_builds/<conversation>/<run id>/<asset>.parquet``
(``store.builds``), never over the published one; the run's ``memory`` asset publishes the whole
build at the end. An input comes from the run's own build when the run (or the run it re-executes)
made it, else from the published memory. (dagster-polars 0.27 cannot load inputs under polars 2,
hence our own IO manager.)

Each table keeps its build record: the run that wrote it, the fingerprints of the inputs its step
loaded (recorded when they were loaded, so a table rewritten meanwhile cannot be mistaken for the one
used), and the settings of its stage (``pipeline.stages``). A step refuses inputs of two builds.
"""

from __future__ import annotations

import polars as pl
from dagster import InputContext, IOManager, MetadataValue, OutputContext
from upath import UPath

from seem_dagster import faults, interrupts
from seem_dagster.config import SeemConfig
from seem_dagster.pipeline.stages import SOURCE_ASSETS, SOURCE_RECORD, stage_config
from seem_dagster.store import builds, snapshot
from seem_dagster.store.keys import file_stem

# Executors that run every step of a run in the process that launched it.
IN_PROCESS_EXECUTORS = ("execute_in_process_executor", "in_process")


def _step(context) -> tuple[str, str] | None:
    try:
        return context.step_context.run_id, context.step_context.step.key
    except Exception:  # contexts built outside a run (build_input_context) have no step
        return None


def build_chain(run, instance) -> list[str]:
    """The run's id, then those of the runs it re-executes (their staged tables count as this run's)."""
    chain = [run.run_id]
    while run is not None and run.parent_run_id and run.parent_run_id not in chain:
        chain.append(run.parent_run_id)
        run = instance.get_run_by_id(run.parent_run_id)
    return chain


def runs_in_process(context) -> bool:
    try:
        return context.step_context.job_def.executor_def.name in IN_PROCESS_EXECUTORS
    except Exception:
        return False


class ParquetSnapshotIOManager(IOManager):
    """One file per asset per partition, in the run's own build until the build is published."""

    def __init__(self, base_path: UPath, config: SeemConfig | None = None):
        self.base_path = base_path
        self.config = config
        # (run id, step key) -> [(asset, partition file stem, footer record)] of the inputs it loaded
        self._loaded: dict[tuple[str, str], list[tuple[str, str, dict]]] = {}
        self._chains: dict[str, list[str]] = {}

    def _chain(self, context) -> list[str]:
        run_id = context.step_context.run_id
        if run_id not in self._chains:
            self._chains[run_id] = build_chain(context.step_context.dagster_run, context.step_context.instance)
        return self._chains[run_id]

    @staticmethod
    def _partitions(context) -> list[str]:
        if not context.has_asset_partitions:
            raise TypeError(f"{context.asset_key.to_user_string()}: the snapshot store holds partitioned assets only "
                            "(one partition per conversation)")
        return list(context.asset_partition_keys)

    def handle_output(self, context: OutputContext, obj) -> None:
        partitions = self._partitions(context)
        name = context.asset_key.to_user_string()
        interrupts.stop_if_received(f"{name} was not written")  # a signal whose handler's exception was swallowed
        # A run over a partition range (BackfillPolicy.single_run) hands over {partition: table}.
        if len(partitions) > 1 and (not isinstance(obj, dict) or set(obj) != set(partitions)):
            raise TypeError(f"{name}: a run over {len(partitions)} partitions must output a dict with one table per partition")
        tables = obj if len(partitions) > 1 else {partitions[0]: obj}
        step = _step(context)
        if step is None:
            raise TypeError(f"{name}: snapshots are written by Dagster runs only (each run is a build)")
        for partition, frame in tables.items():
            record, path = self._write(context, frame, partition, step)
            if len(partitions) == 1:
                context.add_output_metadata({
                    "path": MetadataValue.path(str(path)),
                    "snapshot_build": MetadataValue.text(record["build_id"] or "unknown"),
                    "snapshot_fingerprint": MetadataValue.text(record["fingerprint"]),
                    "made_from": MetadataValue.json(record["upstream"]),
                    "stage_config": MetadataValue.json(record["stage"]),
                })

    def _write(self, context: OutputContext, obj, partition: str, step: tuple[str, str]) -> tuple[dict, UPath]:
        if not isinstance(obj, pl.DataFrame):
            raise TypeError(f"{context.asset_key.to_user_string()}: expected a polars DataFrame, got {type(obj).__name__}")
        asset = context.asset_key.path[-1]
        run_id = step[0]
        builds.claim(self.base_path, partition, run_id, in_process=runs_in_process(context))
        stem = file_stem(partition)
        upstream = {a: r["fingerprint"] for a, s, r in self._loaded.get(step, []) if s == stem and "fingerprint" in r}
        path = snapshot.staged_path(self.base_path, partition, run_id, asset)
        faults.point(faults.table_point(asset, "before"))
        record = snapshot.write_snapshot(path, obj, asset=asset, conversation_id=partition, build_id=run_id,
                                         upstream=upstream, stage=self._stage(context, asset), durable=False)
        faults.point(faults.table_point(asset, "after"))
        return record, path

    def _stage(self, context: OutputContext, asset: str) -> dict:
        if self.config is None:
            return {}
        # The ingest step says which source it read; reading the registry again here could see a newer one.
        record = context.output_metadata.get(SOURCE_RECORD) if asset in SOURCE_ASSETS else None
        return stage_config(asset, self.config, getattr(record, "value", record))

    def load_input(self, context: InputContext):
        partitions = self._partitions(context)
        if not partitions:
            return None
        frames = {p: self._load(context, p) for p in partitions}
        return frames[partitions[0]] if len(partitions) == 1 else frames

    def _load(self, context: InputContext, partition: str) -> pl.DataFrame:
        asset = context.asset_key.path[-1]
        step = _step(context)
        path = builds.staged_table(self.base_path, partition, self._chain(context), asset) if step else None
        if path is None:
            path = snapshot.table_path(self.base_path, asset, partition)  # the published memory
        frame, record = snapshot.read_table_with_footer(path)
        if step is not None:
            stem = file_stem(partition)
            loaded = self._loaded.setdefault(step, [])
            loaded.append((asset, stem, record))
            # A step computes from one build: its inputs must have been made from each other.
            snapshot.check_consistent(partition, {a: r for a, s, r in loaded if s == stem})
        return frame
