"""The manifest: which files make one conversation's published memory.

``<root>/_manifests/<conversation stem>.json`` names, for every table of the memory, the file that
holds it (under ``_builds/<stem>/<build id>/``), the build that wrote it and its content fingerprint,
plus the source the memory was built from and the tables of the build it replaced (kept on disk
until the next publish, for readers that opened the previous manifest). A build writes its tables
first and replaces the manifest last, in one whole-file write: a reader that follows the manifest
sees the previous memory or the new one, never a mix, whenever the build stops.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import PurePosixPath

from upath import UPath

from seem_dagster.store.files import as_root, exclusive, write_bytes_atomic
from seem_dagster.store.keys import file_stem

FOLDER = "_manifests"
FORMAT = 1


class SnapshotError(RuntimeError):
    pass


class InconsistentSnapshot(SnapshotError):
    pass


def manifest_path(root, conversation_id: str) -> UPath:
    return as_root(root) / FOLDER / f"{file_stem(conversation_id)}.json"


def resolve(root, relative: str) -> UPath:
    """A path the manifest names, inside the store (a manifest is data: it cannot point outside)."""
    parts = PurePosixPath(relative).parts
    if not parts or PurePosixPath(relative).is_absolute() or ".." in parts:
        raise SnapshotError(f"manifest names a path outside the store: {relative!r}")
    return as_root(root).joinpath(*parts)


def read_manifest(root, conversation_id: str) -> dict | None:
    """The published manifest, or None when the conversation has never been published."""
    path = manifest_path(root, conversation_id)
    try:
        data = json.loads(_read_current(path))
    except FileNotFoundError:
        return None
    except ValueError as err:
        raise SnapshotError(f"{path}: unreadable manifest ({err}); rebuild the conversation") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("tables"), dict):
        raise SnapshotError(f"{path}: not a manifest of format {FORMAT}; rebuild the conversation")
    return data


def _read_current(path, attempts: int = 5) -> bytes:
    """The manifest's bytes. On an object store a publish can replace the manifest between the
    reader's look-up of the object and its read (s3fs then raises FileExpired: the version it looked
    up is gone); reading again gives the new manifest, which is whole."""
    for _ in range(attempts - 1):
        try:
            return path.read_bytes()
        except OSError as err:
            if type(err).__name__ != "FileExpired":
                raise
    return path.read_bytes()


def write_manifest(root, conversation_id: str, manifest: dict) -> None:
    write_bytes_atomic(manifest_path(root, conversation_id), json.dumps(manifest, indent=1, sort_keys=True).encode())


@contextlib.contextmanager
def publish_lock(root, conversation_id: str) -> Iterator[None]:
    """One publisher of a conversation at a time, so two runs finishing together cannot lose each
    other's tables. Local stores: an advisory lock file. Object stores have no such lock; there the
    last of two simultaneous publishes of one conversation wins (each is whole)."""
    with exclusive(manifest_path(root, conversation_id).parent, file_stem(conversation_id)):
        yield


def published_rows(root, conversation_id: str, asset: str = "passages") -> int | None:
    """Rows of a published table as its manifest records them (None: nothing published, or an older manifest)."""
    manifest = read_manifest(root, conversation_id)
    entry = (manifest or {}).get("tables", {}).get(asset) or {}
    return entry.get("rows")
