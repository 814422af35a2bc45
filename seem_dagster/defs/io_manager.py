"""Our own IO manager on UPathIOManager (dagster-polars 0.27 cannot load inputs under polars 2)."""

from __future__ import annotations

import polars as pl
from dagster import InputContext, OutputContext
from dagster._core.storage.upath_io_manager import UPathIOManager
from upath import UPath

from seem_dagster import ids
from seem_dagster.schemas import Passages
from seem_dagster.store import snapshot
from seem_dagster.store.keys import file_stem

PASSAGES_ASSET = "passages"


class ParquetSnapshotIOManager(UPathIOManager):
    """One file per asset per partition: ``<root>/<asset>/<conversation stem>.parquet``, written atomically."""

    extension = snapshot.EXTENSION

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
        self._write(context, obj, path, context.partition_key if context.has_partition_key else None)

    def _write(self, context: OutputContext, obj: pl.DataFrame, path: UPath, partition: str | None) -> None:
        if not isinstance(obj, pl.DataFrame):
            raise TypeError(f"{context.asset_key.to_user_string()}: expected a polars DataFrame, got {type(obj).__name__}")
        asset = context.asset_key.path[-1]
        snapshot.write_table(path, obj, snapshot.footer(asset, partition, self._passages_fingerprint(asset, obj, path, partition)))

    def _passages_fingerprint(self, asset: str, obj: pl.DataFrame, path: UPath, partition: str | None) -> str | None:
        if asset == PASSAGES_ASSET:
            return ids.fingerprint(obj[Passages.passage_id].to_list())
        if partition is None:
            return None
        # Every other table was built from the partition's current passages file in this run.
        passages_path = self._base_path / PASSAGES_ASSET / (file_stem(partition) + self.extension)
        return snapshot.read_footer(passages_path).get("passages_fingerprint") if passages_path.exists() else None

    def load_from_path(self, context: InputContext, path: UPath) -> pl.DataFrame:
        return snapshot.read_table(path)
