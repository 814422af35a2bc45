"""Settings chosen by environment or run config, never by editing code."""

from __future__ import annotations

import os

from dagster import ConfigurableIOManagerFactory, ConfigurableResource, EnvVar  # noqa: F401
from upath import UPath

from seem_dagster.defs.io_manager import ParquetSnapshotIOManager
from seem_dagster.ingest import IngestOptions

DEFAULT_STORE = "assets"
DEFAULT_INBOX = "inbox"


def default_store() -> str:
    return os.environ.get("SEEM_STORE", DEFAULT_STORE)


def default_inbox() -> str:
    return os.environ.get("SEEM_INBOX", DEFAULT_INBOX)


class SeemSettings(ConfigurableResource):
    """Where the memory lives and how strictly input is read."""

    store_root: str = DEFAULT_STORE
    inbox: str = DEFAULT_INBOX
    max_turn_chars: int = IngestOptions.max_turn_chars
    allow_empty_turns: bool = IngestOptions.allow_empty_turns

    def root(self) -> UPath:
        return UPath(self.store_root)

    def ingest_options(self) -> IngestOptions:
        return IngestOptions(max_turn_chars=self.max_turn_chars, allow_empty_turns=self.allow_empty_turns)


class SnapshotIOManager(ConfigurableIOManagerFactory):
    """Parquet snapshots under ``store_root`` (a local folder or any fsspec URL)."""

    store_root: str = DEFAULT_STORE

    def create_io_manager(self, context) -> ParquetSnapshotIOManager:
        return ParquetSnapshotIOManager(UPath(self.store_root))
