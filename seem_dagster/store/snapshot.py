"""Parquet snapshots: one file per asset per conversation, written atomically, read consistently.

Layout under a root (a local folder or any fsspec URL)::

    <root>/<asset>/<conversation file stem>.parquet

Each snapshot carries a small JSON record in its Parquet footer (key ``seem``): the asset and
conversation, the build (Dagster run) that wrote it, a fingerprint of its content, the fingerprints
of the upstream tables it was made from, and the settings and code versions of its stage. A reader
of several tables checks that each one was made from the others as they are stored, so it never
mixes two builds: a mismatch is an ``InconsistentSnapshot`` naming the tables and builds.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path

import polars as pl
import pyarrow as pa
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


def read_table_with_footer(path: UPath) -> tuple[pl.DataFrame, dict]:
    """The table and its footer record, from one open of the file."""
    if not path.exists():
        raise SnapshotError(f"{path}: no snapshot (has this conversation been built?)")
    with path.open("rb") as fh:
        table = pq.read_table(fh)
    raw = (table.schema.metadata or {}).get(FOOTER_KEY)
    return pl.from_arrow(table.replace_schema_metadata(None)), json.loads(raw) if raw else {}


def read_table(path: UPath) -> pl.DataFrame:
    return read_table_with_footer(path)[0]


def content_fingerprint(table: pa.Table) -> str:
    """A digest of a table's schema and rows (its Arrow IPC stream), footer metadata excluded."""
    table = table.replace_schema_metadata(None).combine_chunks()  # the same rows hash alike however chunked
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return hashlib.blake2b(sink.getvalue().to_pybytes(), digest_size=16).hexdigest()


def write_snapshot(
    path: UPath, frame: pl.DataFrame, *, asset: str, conversation_id: str | None, build_id: str | None,
    upstream: dict[str, str], stage: dict,
) -> dict:
    """Write one snapshot with its build record; returns the footer written."""
    record = {
        "asset": asset,
        "conversation_id": conversation_id,
        "build_id": build_id,
        "fingerprint": content_fingerprint(frame.to_arrow()),
        "upstream": dict(sorted(upstream.items())),
        "stage": stage,
        "written_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    write_table(path, frame, record)
    return record


def _short(build: str | None) -> str:
    return (build or "unknown")[:8]


def check_consistent(conversation_id: str, footers: dict[str, dict]) -> None:
    """Raise InconsistentSnapshot unless every table was made from the others as they are stored."""
    old = [a for a, f in footers.items() if "fingerprint" not in f]
    if old:
        raise InconsistentSnapshot(
            f"conversation {conversation_id!r}: {', '.join(old)} carry no build record (written by an older seem-dagster): "
            "rebuild the conversation"
        )
    clashes = []
    for asset, record in footers.items():
        for upstream, fingerprint in record.get("upstream", {}).items():
            stored = footers.get(upstream)
            if stored is not None and stored["fingerprint"] != fingerprint:
                clashes.append(f"{asset} (build {_short(record.get('build_id'))}) was made from another {upstream} than the "
                               f"stored one (build {_short(stored.get('build_id'))})")
    if clashes:
        raise InconsistentSnapshot(
            f"conversation {conversation_id!r}: tables come from different builds: {'; '.join(clashes)}. "
            "A build is running or failed half-way: retry after it finishes, or rebuild"
        )


def read_footers(root: str | os.PathLike | UPath, conversation_id: str, assets: Iterable[str]) -> dict[str, dict]:
    paths = {a: table_path(root, a, conversation_id) for a in assets}
    missing = [a for a, p in paths.items() if not p.exists()]
    if missing:
        raise SnapshotError(f"conversation {conversation_id!r} has no snapshot of {', '.join(missing)} under {as_root(root)}")
    return {a: read_footer(p) for a, p in paths.items()}


def _with_lineage(root, conversation_id: str, footers: dict[str, dict]) -> dict[str, dict]:
    """``footers`` plus those of every table they were made from, transitively: two tables that agree
    with each other can still come from two builds that agree on a common upstream only."""
    out = dict(footers)
    todo = [u for f in footers.values() for u in f.get("upstream", {})]
    while todo:
        asset = todo.pop()
        path = table_path(root, asset, conversation_id)
        if asset in out or not path.exists():
            continue
        out[asset] = read_footer(path)
        todo.extend(out[asset].get("upstream", {}))
    return out


def read_snapshot(root: str | os.PathLike | UPath, conversation_id: str, assets: Iterable[str]) -> dict[str, pl.DataFrame]:
    """Read several tables of one conversation that were made from each other.

    Raises InconsistentSnapshot when they were not (a rebuild half-way, a table materialized alone
    after its upstream changed), so a query never answers from a mix of two builds.
    """
    assets = list(assets)
    before = read_footers(root, conversation_id, assets)
    check_consistent(conversation_id, _with_lineage(root, conversation_id, before))
    frames = {a: read_table(table_path(root, a, conversation_id)) for a in assets}
    # A table replaced between the footer check and the read shows up as a changed fingerprint.
    after = read_footers(root, conversation_id, assets)
    if any(after[a].get("fingerprint") != before[a].get("fingerprint") for a in assets):
        raise InconsistentSnapshot(f"conversation {conversation_id!r}: a build replaced tables while reading; retry")
    return frames
