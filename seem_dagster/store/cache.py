"""The store's caches of one conversation: extraction results, model replies, vectors, saved fusion.

``<root>/_cache/<kind>/<name>/<conversation stem>.parquet``. Per conversation, so parallel runs of
different partitions never write the same file; written atomically like every snapshot. This is the
one adapter the pipeline steps read and write their caches through.
"""

from __future__ import annotations

import re

import polars as pl
from upath import UPath

from seem_dagster.store.keys import file_stem
from seem_dagster.store.snapshot import EXTENSION, as_root, read_table, write_table

FOLDER = "_cache"
KEY = "key"
VALUE = "value"


class ConversationCache:
    def __init__(self, root, conversation_id: str):
        self.root = as_root(root)
        self.conversation_id = conversation_id

    def path(self, kind: str, name: str) -> UPath:
        safe = re.sub(r"[^A-Za-z0-9_.@-]+", "_", name)
        return self.root / FOLDER / kind / safe / (file_stem(self.conversation_id) + EXTENSION)

    def table(self, kind: str, name: str) -> pl.DataFrame | None:
        path = self.path(kind, name)
        return read_table(path) if path.exists() else None

    def put_table(self, kind: str, name: str, frame: pl.DataFrame, *, stored: pl.DataFrame | None = None) -> None:
        """``stored``: what the caller read from this cache entry; an unchanged table is not written again
        (a rebuild with nothing new writes nothing)."""
        if stored is not None and stored.equals(frame):
            return
        write_table(self.path(kind, name), frame, {"cache": True})

    def kv(self, kind: str, name: str) -> dict[str, str]:
        frame = self.table(kind, name)
        return dict(zip(frame[KEY].to_list(), frame[VALUE].to_list())) if frame is not None else {}

    def put_kv(self, kind: str, name: str, entries: dict[str, str], *, stored: dict[str, str] | None = None) -> None:
        if stored is not None and stored == entries:
            return
        keys = sorted(entries)
        frame = pl.DataFrame({KEY: keys, VALUE: [entries[k] for k in keys]}, schema={KEY: pl.String(), VALUE: pl.String()})
        self.put_table(kind, name, frame)
