"""Our own IO manager on UPathIOManager (dagster-polars 0.27 cannot load inputs under polars 2).

Besides reading and writing one Parquet file per asset per partition, it keeps each table's build
record: the run that wrote it, the fingerprints of the inputs its step loaded (recorded when they
were loaded, so a table rewritten meanwhile cannot be mistaken for the one used), and the settings of
its stage (``pipeline.stages``). Readers use the record to refuse a mix of builds.
"""

from __future__ import annotations

import polars as pl
from dagster import InputContext, MetadataValue, OutputContext
from dagster._core.storage.upath_io_manager import UPathIOManager
from upath import UPath

from seem_dagster.config import SeemConfig
from seem_dagster.pipeline.stages import SOURCE_ASSETS, SOURCE_RECORD, stage_config
from seem_dagster.store import snapshot
from seem_dagster.store.keys import file_stem


def _step(context) -> tuple[str, str] | None:
    try:
        return context.step_context.run_id, context.step_context.step.key
    except Exception:  # contexts built outside a run (build_input_context) have no step
        return None


class ParquetSnapshotIOManager(UPathIOManager):
    """One file per asset per partition: ``<root>/<asset>/<conversation stem>.parquet``, written atomically."""

    extension = snapshot.EXTENSION

    def __init__(self, base_path: UPath, config: SeemConfig | None = None):
        super().__init__(base_path=base_path)
        self.config = config
        # (run id, step key) -> [(asset, partition file stem, footer record)] of the inputs it loaded
        self._loaded: dict[tuple[str, str], list[tuple[str, str, dict]]] = {}

    def make_safe_partition_path(self, base_path: UPath, partition: str) -> UPath:
        # Conversation ids are user data: encode them so no id can leave the asset's folder.
        return base_path / file_stem(partition)

    def handle_output(self, context: OutputContext, obj) -> None:
        # A run over a partition range (BackfillPolicy.single_run) hands over {partition: table}.
        if context.has_asset_partitions and len(context.asset_partition_keys) > 1:
            if not isinstance(obj, dict) or set(obj) != set(context.asset_partition_keys):
                raise TypeError(f"{context.asset_key.to_user_string()}: a run over {len(context.asset_partition_keys)} partitions "
                                "must output a dict with one table per partition")
            for partition, path in self._get_paths_for_partitions(context).items():
                path.parent.mkdir(parents=True, exist_ok=True)
                self._write(context, obj[partition], path, partition)
            return
        super().handle_output(context, obj)

    def dump_to_path(self, context: OutputContext, obj: pl.DataFrame, path: UPath) -> None:
        record = self._write(context, obj, path, context.partition_key if context.has_partition_key else None)
        context.add_output_metadata({
            "snapshot_build": MetadataValue.text(record["build_id"] or "unknown"),
            "snapshot_fingerprint": MetadataValue.text(record["fingerprint"]),
            "made_from": MetadataValue.json(record["upstream"]),
            "stage_config": MetadataValue.json(record["stage"]),
        })

    def _write(self, context: OutputContext, obj: pl.DataFrame, path: UPath, partition: str | None) -> dict:
        if not isinstance(obj, pl.DataFrame):
            raise TypeError(f"{context.asset_key.to_user_string()}: expected a polars DataFrame, got {type(obj).__name__}")
        asset = context.asset_key.path[-1]
        step = _step(context)
        stem = file_stem(partition) if partition is not None else None
        upstream = {a: r["fingerprint"] for a, s, r in self._loaded.get(step, []) if s == stem and "fingerprint" in r} if step else {}
        return snapshot.write_snapshot(
            path, obj, asset=asset, conversation_id=partition, build_id=step[0] if step else None,
            upstream=upstream, stage=self._stage(context, asset),
        )

    def _stage(self, context: OutputContext, asset: str) -> dict:
        if self.config is None:
            return {}
        # The ingest step says which source it read; reading the registry again here could see a newer one.
        record = context.output_metadata.get(SOURCE_RECORD) if asset in SOURCE_ASSETS else None
        return stage_config(asset, self.config, getattr(record, "value", record))

    def load_from_path(self, context: InputContext, path: UPath) -> pl.DataFrame:
        frame, record = snapshot.read_table_with_footer(path)
        step = _step(context)
        if step is not None:
            loaded = self._loaded.setdefault(step, [])
            loaded.append((path.parent.name, path.stem, record))
            # A step computes from one build: its inputs must have been made from each other.
            snapshot.check_consistent(path.stem, {a: r for a, s, r in loaded if s == path.stem})
        return frame
