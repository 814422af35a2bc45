"""Parquet snapshots: one file per asset per conversation, written atomically, read consistently.

Layout under a root (a local folder or any fsspec URL)::

    <root>/<asset>/<conversation file stem>.parquet

Each file carries a small JSON record in the Parquet footer (key ``seem``): the asset, the
conversation and the fingerprint of the passages it was built from. A reader that needs several
tables of one conversation checks that they agree, so it never mixes two builds.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
from upath import UPath

from seem_dagster.store.keys import file_stem

EXTENSION = ".parquet"
FOOTER_KEY = b"seem"
TEMP_PREFIX = ".tmp-"


class SnapshotError(RuntimeError):
    pass


class InconsistentSnapshot(SnapshotError):
    pass


def as_root(root: str | os.PathLike | UPath) -> UPath:
    return root if isinstance(root, UPath) else UPath(root)


def table_path(root: str | os.PathLike | UPath, asset: str, conversation_id: str) -> UPath:
    return as_root(root) / asset / (file_stem(conversation_id) + EXTENSION)


def _is_local(path: UPath) -> bool:
    return getattr(path, "protocol", "") in ("", "file", "local")


def write_table(path: UPath, frame: pl.DataFrame, footer: dict) -> None:
    """Write ``frame`` so that a reader sees the old file or the new one, never a partial one.

    Locally: write a hidden temp file in the same folder, fsync, then ``os.replace`` (atomic on
    POSIX). On object stores a single PUT only becomes visible when complete, so the temp object is
    moved into place the same way and readers never list temp names.
    """
    table = frame.to_arrow()
    meta = dict(table.schema.metadata or {})
    meta[FOOTER_KEY] = json.dumps(footer, sort_keys=True, default=str).encode()
    table = table.replace_schema_metadata(meta)
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.parent / f"{TEMP_PREFIX}{path.name}.{uuid.uuid4().hex}"
    try:
        if _is_local(path):
            local_temp = Path(temp.path)
            with open(local_temp, "wb") as fh:
                pq.write_table(table, fh, compression="zstd")
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(local_temp, Path(path.path))
            _fsync_dir(Path(path.path).parent)
        else:
            with temp.open("wb") as fh:
                pq.write_table(table, fh, compression="zstd")
            temp.fs.mv(temp.path, path.path)
    finally:
        try:
            if temp.exists():
                temp.unlink()
        except OSError:
            pass


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def read_footer(path: UPath) -> dict:
    with path.open("rb") as fh:
        meta = pq.read_schema(fh).metadata or {}
    raw = meta.get(FOOTER_KEY)
    return json.loads(raw) if raw else {}


def read_table(path: UPath) -> pl.DataFrame:
    if not path.exists():
        raise SnapshotError(f"{path}: no snapshot (has this conversation been built?)")
    with path.open("rb") as fh:
        table = pq.read_table(fh)
    return pl.from_arrow(table.replace_schema_metadata(None))


def footer(asset: str, conversation_id: str, passages_fingerprint: str | None, **extra) -> dict:
    return {
        "asset": asset,
        "conversation_id": conversation_id,
        "passages_fingerprint": passages_fingerprint,
        "written_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        **extra,
    }


def read_snapshot(root: str | os.PathLike | UPath, conversation_id: str, assets: Iterable[str]) -> dict[str, pl.DataFrame]:
    """Read several tables of one conversation, all built from the same passages.

    Raises InconsistentSnapshot when a rebuild is half-way (some tables newer than others), so a
    query never answers from a mix of two builds; retrying after the build finishes succeeds.
    """
    assets = list(assets)
    paths = {a: table_path(root, a, conversation_id) for a in assets}
    prints = {a: read_footer(p).get("passages_fingerprint") if p.exists() else None for a, p in paths.items()}
    missing = [a for a, p in paths.items() if not p.exists()]
    if missing:
        raise SnapshotError(f"conversation {conversation_id!r} has no snapshot of {', '.join(missing)} under {as_root(root)}")
    if len(set(prints.values())) > 1:
        detail = ", ".join(f"{a}={(fp or 'none')[:8]}" for a, fp in prints.items())
        raise InconsistentSnapshot(
            f"conversation {conversation_id!r}: tables come from different builds ({detail}); "
            "a build is running or failed half-way: retry after it finishes"
        )
    frames = {a: read_table(p) for a, p in paths.items()}
    # A table replaced between the footer check and the read shows up as a changed fingerprint.
    after = {a: read_footer(p).get("passages_fingerprint") for a, p in paths.items()}
    if after != prints:
        raise InconsistentSnapshot(f"conversation {conversation_id!r}: a build replaced tables while reading; retry")
    return frames
