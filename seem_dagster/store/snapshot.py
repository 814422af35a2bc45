"""Parquet snapshots: one file per table, written whole, read as one published memory.

Layout under a root (a local folder or any fsspec URL)::

    <root>/_builds/<conversation stem>/<build id>/<asset>.parquet   each build's tables (builds.py)
    <root>/_manifests/<conversation stem>.json                        the published memory (manifest.py)

Each snapshot carries a small JSON record in its Parquet footer (key ``seem``): the asset and
conversation, the build (Dagster run) that wrote it, a fingerprint of its content, the fingerprints
of the upstream tables it was made from, and the settings and code versions of its stage. Readers
follow the manifest, so they see the last complete build whatever a running or killed build has
written; they still check that each table was made from the others as they are stored (a mismatch
is an ``InconsistentSnapshot`` naming the tables and builds).

A store written before manifests (``<root>/<asset>/<stem>.parquet``) is still read, with that check;
the first build of a conversation publishes a manifest, and the older files are removed at the
publish after it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Iterable
from datetime import datetime, timezone

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
from upath import UPath

from seem_dagster.store.files import TEMP_PREFIX, as_root, write_atomic
from seem_dagster.store.keys import file_stem
from seem_dagster.store.manifest import InconsistentSnapshot, SnapshotError, read_manifest, resolve

__all__ = [
    "EXTENSION", "FOOTER_KEY", "TEMP_PREFIX", "SnapshotError", "InconsistentSnapshot", "as_root", "table_path", "legacy_path",
    "staged_path", "write_table", "read_footer", "read_table", "read_table_with_footer", "content_fingerprint",
    "write_snapshot", "check_consistent", "read_footers", "read_snapshot", "read_published",
]

EXTENSION = ".parquet"
FOOTER_KEY = b"seem"
BUILDS = "_builds"
_BUILD_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,99}$")
# A reader that opened a manifest whose files were then removed (two newer builds published while it
# read) reads the newest manifest again, at most this many times.
READ_ATTEMPTS = 3


def legacy_path(root: str | os.PathLike | UPath, asset: str, conversation_id: str) -> UPath:
    """Where stores written before manifests keep a table: ``<root>/<asset>/<stem>.parquet``."""
    return as_root(root) / asset / (file_stem(conversation_id) + EXTENSION)


def check_build_id(build_id: str) -> str:
    if not isinstance(build_id, str) or not _BUILD_ID.match(build_id):
        raise SnapshotError(f"unusable build id {build_id!r} (letters, digits, '_' and '-' only)")
    return build_id


def build_folder(root, conversation_id: str, build_id: str) -> UPath:
    return as_root(root) / BUILDS / file_stem(conversation_id) / check_build_id(build_id)


def staged_path(root, conversation_id: str, build_id: str, asset: str) -> UPath:
    """Where build ``build_id`` writes ``asset`` of the conversation (nobody reads it before publish)."""
    return build_folder(root, conversation_id, build_id) / (asset + EXTENSION)


def table_path(root: str | os.PathLike | UPath, asset: str, conversation_id: str) -> UPath:
    """The file a reader reads ``asset`` from now: the published one, or the older layout's."""
    manifest = read_manifest(root, conversation_id)
    if manifest is not None and asset in manifest["tables"]:
        return resolve(root, manifest["tables"][asset]["path"])
    return legacy_path(root, asset, conversation_id)


def write_table(path: UPath, frame: pl.DataFrame, footer: dict, *, durable: bool = True) -> None:
    """Write ``frame`` so that a reader sees the old file or the new one, never a partial one."""
    table = frame.to_arrow()
    meta = dict(table.schema.metadata or {})
    meta[FOOTER_KEY] = json.dumps(footer, sort_keys=True, default=str).encode()
    table = table.replace_schema_metadata(meta)
    dictionary = [path for field in table.schema for path, kind in _leaves(field.name, field.type) if not pa.types.is_floating(kind)]
    write_atomic(path, lambda fh: pq.write_table(table, fh, compression="zstd", use_dictionary=dictionary), durable=durable)


def _leaves(path: str, kind: pa.DataType) -> Iterable[tuple[str, pa.DataType]]:
    """Parquet's leaf columns as pyarrow names them (``vector.list.element``, ``struct.field``), with
    their types. Only leaves that are not floats are dictionary-encoded: nearly every float is distinct,
    so the writer would build a dictionary and fall back; without it a table of MiniLM vectors is
    written in 2/5 of the time, read faster and comes out 16% smaller."""
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        yield from _leaves(f"{path}.list.element", kind.value_type)
    elif pa.types.is_struct(kind):
        for child in kind:
            yield from _leaves(f"{path}.{child.name}", child.type)
    else:
        yield path, kind


def read_footer(path: UPath) -> dict:
    with path.open("rb") as fh:
        meta = pq.read_schema(fh).metadata or {}
    raw = meta.get(FOOTER_KEY)
    return json.loads(raw) if raw else {}


def read_table_with_footer(path: UPath) -> tuple[pl.DataFrame, dict]:
    """The table and its footer record, from one open of the file."""
    try:
        with path.open("rb") as fh:
            table = pq.read_table(fh)
    except FileNotFoundError:
        raise SnapshotError(f"{path}: no snapshot (has this conversation been built?)") from None
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
    upstream: dict[str, str], stage: dict, durable: bool = True,
) -> dict:
    """Write one snapshot with its build record; returns the footer written. ``durable=False``: a
    build's own table, made durable when the build is published."""
    record = {
        "asset": asset,
        "conversation_id": conversation_id,
        "build_id": build_id,
        "fingerprint": content_fingerprint(frame.to_arrow()),
        "rows": frame.height,
        "upstream": dict(sorted(upstream.items())),
        "stage": stage,
        "written_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    write_table(path, frame, record, durable=durable)
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


def _paths(root, conversation_id: str, manifest: dict | None, assets: Iterable[str]) -> dict[str, UPath]:
    assets = list(assets)
    if manifest is None:
        paths = {a: legacy_path(root, a, conversation_id) for a in assets}
        missing = [a for a, p in paths.items() if not p.exists()]
    else:
        missing = [a for a in assets if a not in manifest["tables"]]
        paths = {a: resolve(root, manifest["tables"][a]["path"]) for a in assets if a not in missing}
    if missing:
        raise SnapshotError(f"conversation {conversation_id!r} has no snapshot of {', '.join(missing)} under {as_root(root)}")
    return paths


def read_footers(root: str | os.PathLike | UPath, conversation_id: str, assets: Iterable[str]) -> dict[str, dict]:
    """The build records of the published tables (or the older layout's)."""
    paths = _paths(root, conversation_id, read_manifest(root, conversation_id), assets)
    try:
        return {a: read_footer(p) for a, p in paths.items()}
    except FileNotFoundError as err:
        raise SnapshotError(f"conversation {conversation_id!r}: {err.filename}: the published table is gone; rebuild") from None


def _with_lineage(footers: dict[str, dict], footer_of: Callable[[str], dict | None]) -> dict[str, dict]:
    """``footers`` plus those of every table they were made from, transitively: two tables that agree
    with each other can still come from two builds that agree on a common upstream only."""
    out = dict(footers)
    todo = [u for f in footers.values() for u in f.get("upstream", {})]
    while todo:
        asset = todo.pop()
        if asset in out:
            continue
        footer = footer_of(asset)
        if footer is not None:
            out[asset] = footer
            todo.extend(footer.get("upstream", {}))
    return out


def read_snapshot(root: str | os.PathLike | UPath, conversation_id: str, assets: Iterable[str]) -> dict[str, pl.DataFrame]:
    """Several tables of one conversation's published memory, made from each other (``read_published``)."""
    return read_published(root, conversation_id, assets)[0]


def read_published(root: str | os.PathLike | UPath, conversation_id: str, assets: Iterable[str]) -> tuple[dict[str, pl.DataFrame], dict | None]:
    """Several tables of one conversation's published memory, made from each other, and the manifest
    they were read through (None for a store written before manifests).

    Follows the manifest, so a build that is running, failed or was killed half-way is never seen; the
    base build's tables come with the manifest's append commits applied (``store.commits``).
    Raises SnapshotError when a table is missing, InconsistentSnapshot when the tables were not made
    from each other (a table replaced by hand, or a store written before manifests mid-build).
    """
    assets = list(assets)
    for _ in range(READ_ATTEMPTS):
        manifest = read_manifest(root, conversation_id)
        if manifest is None:
            return _read_unpublished(root, conversation_id, assets), None
        paths = _paths(root, conversation_id, manifest, assets)
        try:
            read = {a: read_table_with_footer(p) for a, p in paths.items()}

            def footer_of(asset: str, manifest=manifest) -> dict | None:
                entry = manifest["tables"].get(asset)
                return read_footer(resolve(root, entry["path"])) if entry else None

            lineage = _with_lineage({a: footer for a, (_, footer) in read.items()}, footer_of)
            check_consistent(conversation_id, lineage)
            from seem_dagster.store.commits import merged_tables

            return merged_tables(root, manifest, {a: frame for a, (frame, _) in read.items()}), manifest
        except (SnapshotError, FileNotFoundError):
            if read_manifest(root, conversation_id) != manifest:
                continue  # its files were removed after newer builds were published (or a forget): read the newest
            raise
    raise SnapshotError(f"conversation {conversation_id!r}: its memory was republished {READ_ATTEMPTS} times while reading; retry")


def _read_unpublished(root, conversation_id: str, assets: list[str]) -> dict[str, pl.DataFrame]:
    """A store written before manifests: tables replaced one by one, so check them against each other."""
    before = read_footers(root, conversation_id, assets)

    def footer_of(asset: str) -> dict | None:
        path = legacy_path(root, asset, conversation_id)
        return read_footer(path) if path.exists() else None

    check_consistent(conversation_id, _with_lineage(before, footer_of))
    frames = {a: read_table(legacy_path(root, a, conversation_id)) for a in assets}
    # A table replaced between the footer check and the read shows up as a changed fingerprint.
    after = read_footers(root, conversation_id, assets)
    if any(after[a].get("fingerprint") != before[a].get("fingerprint") for a in assets):
        raise InconsistentSnapshot(f"conversation {conversation_id!r}: a build replaced tables while reading; retry")
    return frames
