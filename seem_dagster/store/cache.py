"""The store's caches of one conversation: extraction results, model replies, vectors, saved fusion.

``<root>/_cache/<kind>/<name>/<conversation stem>.parquet``. Per conversation, so parallel runs of
different partitions never write the same file; written atomically like every snapshot. This is the
one adapter the pipeline steps read and write their caches through.

A cache that only grows (vectors by text hash) is appended to instead of rewritten: ``append_rows``
folds a build's many rows into the table at once, and writes an append's few rows as a segment
beside it (``<stem>.parts/<time>-<id>.parquet``); once there are ``COMPACT_AT`` segments they are
merged, into the table when they hold a quarter of its rows or more, else into one segment. So a
small write never rewrites a big table, and the merges cost the order of the rows written. Readers take the table
and every segment; a segment that a concurrent compaction removed between the listing and the read
is skipped (its rows are in the table by then, or the next read finds them there; at worst a text is
embedded again: these are caches, never the memory).
"""

from __future__ import annotations

import re
import time
import uuid
from pathlib import Path

import polars as pl
from upath import UPath

from seem_dagster.store.files import TEMP_PREFIX, is_local, remove_stale_temps, remove_tree
from seem_dagster.store.keys import file_stem
from seem_dagster.store.snapshot import EXTENSION, SnapshotError, as_root, read_table, write_table

FOLDER = "_cache"
KEY = "key"
VALUE = "value"
PARTS = ".parts"
COMPACT_AT = 8  # segments beside a table before they are merged
# Rows (written, or merged segments) are folded into the table once they are 1/FOLD_SHARE of its rows or
# more; until then they stay segments: a write costs the order of the rows it adds, not of the table.
FOLD_SHARE = 4
# Rows written at once from this many on are a build's (an add's turn writes tens): folded at once, so
# no big segment is left for a later add's merge to read and fold.
FOLD_ROWS = 4096


class ConversationCache:
    def __init__(self, root, conversation_id: str):
        self.root = as_root(root)
        self.conversation_id = conversation_id

    def path(self, kind: str, name: str) -> UPath:
        safe = re.sub(r"[^A-Za-z0-9_.@-]+", "_", name)
        return self.root / FOLDER / kind / safe / (file_stem(self.conversation_id) + EXTENSION)

    def table(self, kind: str, name: str) -> pl.DataFrame | None:
        """The table with any appended segments after it (``append_rows``)."""
        path = self.path(kind, name)
        segments = self._segments(path)  # listed before the table is read: see the module's note
        frames = [read_table(path)] if path.exists() else []
        frames += [f for f in (self._read_segment(p) for p in segments) if f is not None]
        if not frames:
            return None
        return frames[0] if len(frames) == 1 else pl.concat(frames, how="vertical_relaxed")

    def append_rows(self, kind: str, name: str, rows: pl.DataFrame, key) -> None:
        """Add ``rows`` to a cache that only grows. Rows that are a good share of the table (a build's;
        FOLD_SHARE) are folded into it at once, with any segments beside it; a few rows (an append's)
        are written alone as a segment, and every COMPACT_AT segments are merged into one, or folded
        into the table once they are that share of it. Rows whose ``key`` is already cached may repeat
        and are dropped when folded."""
        if not rows.height:
            return
        path = self.path(kind, name)
        folder = path.parent / (path.name[: -len(EXTENSION)] + PARTS)
        if rows.height >= FOLD_ROWS or rows.height * FOLD_SHARE >= self._rows(path):  # a build's: folded, never left
            self._fold(path, key, self._segments(path), rows)  # for an agent's add to merge
            return
        write_table(folder / f"{time.time_ns():020d}-{uuid.uuid4().hex[:8]}{EXTENSION}", rows, {"cache": True, "segment": True})
        segments = self._segments(path)
        if len(segments) < COMPACT_AT:
            return
        parts = [f for f in (self._read_segment(p) for p in segments) if f is not None]
        merged = pl.concat(parts, how="vertical_relaxed").unique(subset=key, keep="first", maintain_order=True)
        if merged.height * FOLD_SHARE >= self._rows(path):
            self._fold(path, key, segments, merged, read=False)
            return
        write_table(folder / f"{time.time_ns():020d}-{uuid.uuid4().hex[:8]}{EXTENSION}", merged, {"cache": True, "segment": True})
        for p in segments:  # only those merged: a segment written meanwhile stays
            p.unlink(missing_ok=True)

    def _fold(self, path: UPath, key, segments: list[UPath], rows: pl.DataFrame, read: bool = True) -> None:
        """The table, ``segments`` (read unless ``read`` is False: ``rows`` holds them) and ``rows``,
        written as the table; the segments go."""
        frames = [read_table(path)] if path.exists() else []
        if read:
            frames += [f for f in (self._read_segment(p) for p in segments) if f is not None]
        whole = pl.concat([*frames, rows], how="vertical_relaxed")
        write_table(path, whole.unique(subset=key, keep="first", maintain_order=True).sort(key), {"cache": True})
        for p in segments:  # only those folded in: a segment written meanwhile stays
            p.unlink(missing_ok=True)

    @staticmethod
    def _rows(path: UPath) -> int:
        """The table's rows (0: no table), from its footer alone."""
        import pyarrow.parquet as pq

        try:
            with path.open("rb") as f:
                return pq.ParquetFile(f).metadata.num_rows
        except FileNotFoundError:
            return 0

    @staticmethod
    def _segments(path: UPath) -> list[UPath]:
        folder = path.parent / (path.name[: -len(EXTENSION)] + PARTS)
        if not folder.exists():
            return []
        return sorted((p for p in folder.iterdir() if p.name.endswith(EXTENSION) and not p.name.startswith(TEMP_PREFIX)),
                      key=lambda p: p.name)

    @staticmethod
    def _read_segment(path: UPath) -> pl.DataFrame | None:
        try:
            return read_table(path)
        except SnapshotError:
            if path.exists():
                raise
            return None  # folded into the table by a concurrent compaction

    def put_table(self, kind: str, name: str, frame: pl.DataFrame, *, stored: pl.DataFrame | None = None) -> None:
        """``stored``: what the caller read from this cache entry; an unchanged table is not written again
        (a rebuild with nothing new writes nothing)."""
        if stored is not None and stored.equals(frame):
            return
        write_table(self.path(kind, name), frame, {"cache": True})

    def entries(self) -> list[tuple[str, str]]:
        """(kind, folder name) of every cache this conversation has a table or segments in."""
        base = self.root / FOLDER
        if not base.exists():
            return []
        stem = file_stem(self.conversation_id)
        found = []
        for kind in sorted(p.name for p in base.iterdir() if p.is_dir()):
            for name in sorted(p.name for p in (base / kind).iterdir() if p.is_dir()):
                folder = base / kind / name
                # A temp file alone counts: a build killed while writing the table's first version left it.
                if ((folder / (stem + EXTENSION)).exists() or (folder / (stem + PARTS)).exists()
                        or any(p.name.startswith(f"{TEMP_PREFIX}{stem}{EXTENSION}.") for p in folder.iterdir())):
                    found.append((kind, name))
        return found

    def prune(self, kind: str, name: str, key: str, keep: set[str]) -> int:
        """Keep only the rows whose ``key`` is in ``keep`` (segments folded in); returns rows removed.
        ``name`` is the folder's name as ``entries`` gives it."""
        frame = self.table(kind, name)
        if frame is None:
            self.remove(kind, name)  # a dead writer's temp file, if that is all there is
            return 0
        if is_local(self.path(kind, name)):
            remove_stale_temps(Path(self.path(kind, name).path))
        kept = frame.filter(pl.col(key).is_in(list(keep)))
        removed = frame.height - kept.height
        segments = self._segments(self.path(kind, name))
        if kept.height == 0:
            self.remove(kind, name)
        elif removed or segments:
            write_table(self.path(kind, name), kept.unique(subset=key, keep="first", maintain_order=True), {"cache": True})
            for p in segments:
                p.unlink(missing_ok=True)
        return removed

    def remove(self, kind: str, name: str) -> bool:
        """Delete the conversation's table of this cache, its segments, and the temp files of its
        writers that died (a killed build's half-written table holds the turns it was given)."""
        path = self.path(kind, name)
        existed = path.exists()
        path.unlink(missing_ok=True)
        remove_tree(path.parent / (path.name[: -len(EXTENSION)] + PARTS))
        if is_local(path):
            existed = bool(remove_stale_temps(Path(path.path))) or existed
        return existed

    def kv(self, kind: str, name: str) -> dict[str, str]:
        frame = self.table(kind, name)
        return dict(zip(frame[KEY].to_list(), frame[VALUE].to_list())) if frame is not None else {}

    def append_kv(self, kind: str, name: str, entries: dict[str, str]) -> None:
        """Add ``entries`` to a key-value cache that only grows (results keyed by their input), writing only them."""
        keys = sorted(entries)
        self.append_rows(kind, name, pl.DataFrame({KEY: keys, VALUE: [entries[k] for k in keys]},
                                                  schema={KEY: pl.String(), VALUE: pl.String()}), KEY)

    def put_kv(self, kind: str, name: str, entries: dict[str, str], *, stored: dict[str, str] | None = None) -> None:
        if stored is not None and stored == entries:
            return
        keys = sorted(entries)
        frame = pl.DataFrame({KEY: keys, VALUE: [entries[k] for k in keys]}, schema={KEY: pl.String(), VALUE: pl.String()})
        self.put_table(kind, name, frame)
