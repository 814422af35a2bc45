"""Per-conversation caches in the store: extraction results and embedding vectors.

``<root>/_cache/<kind>/<name>/<conversation stem>.parquet``. Per conversation, so parallel runs of
different partitions never write the same file; written atomically like every snapshot.
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


def cache_path(root, kind: str, name: str, conversation_id: str) -> UPath:
    safe = re.sub(r"[^A-Za-z0-9_.@-]+", "_", name)
    return as_root(root) / FOLDER / kind / safe / (file_stem(conversation_id) + EXTENSION)


def read_cache_table(path: UPath) -> pl.DataFrame | None:
    return read_table(path) if path.exists() else None


def write_cache_table(path: UPath, frame: pl.DataFrame) -> None:
    write_table(path, frame, {"cache": True})


def read_kv(path: UPath) -> dict[str, str]:
    frame = read_cache_table(path)
    return dict(zip(frame[KEY].to_list(), frame[VALUE].to_list())) if frame is not None else {}


def write_kv(path: UPath, entries: dict[str, str]) -> None:
    keys = sorted(entries)
    write_cache_table(path, pl.DataFrame({KEY: keys, VALUE: [entries[k] for k in keys]}, schema={KEY: pl.String(), VALUE: pl.String()}))
