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

from seem_dagster.store.files import as_root, is_local, write_bytes_atomic
from seem_dagster.store.keys import file_stem
from seem_dagster.store.locks import exclusive

FOLDER = "_manifests"
FORMAT = 1
# A manifest that lists append commits is of format 2, so a reader that knows no commits refuses it
# instead of reading the base build alone.
WITH_COMMITS = 2
FORMATS = (FORMAT, WITH_COMMITS)


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
    if not isinstance(data, dict) or data.get("format") not in FORMATS or not isinstance(data.get("tables"), dict):
        raise SnapshotError(f"{path}: not a manifest of format {' or '.join(map(str, FORMATS))}; rebuild the conversation "
                            "(or read it with the seem-dagster that wrote it)")
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


class LostRace(SnapshotError):
    """Another publish replaced the manifest since this writer read it: nothing was written."""


MISSING = "missing"  # ``expect`` of a manifest that did not exist when it was read


def manifest_version(root, conversation_id: str) -> str | None:
    """What a conditional write of the manifest compares with, on an object store: the object's ETag
    (MISSING when there is none). None on a local store, whose publishes take turns under a lock."""
    path = manifest_path(root, conversation_id)
    if is_local(path):
        return None
    try:
        return str(path.fs.info(path.path)["ETag"])
    except FileNotFoundError:
        return MISSING


def write_manifest(root, conversation_id: str, manifest: dict, *, expect: str | None = None) -> None:
    """Replace the manifest in one whole-file write. ``expect`` (object stores): the version read
    before (``manifest_version``): the PUT is conditional on it (If-Match, or If-None-Match for a
    manifest that was missing), so of two publishes racing on one conversation one is refused with
    ``LostRace`` instead of silently replacing the other."""
    path = manifest_path(root, conversation_id)
    body = json.dumps(manifest, indent=1, sort_keys=True).encode()
    if expect is None or is_local(path):
        write_bytes_atomic(path, body)
        return
    condition = {"mode": "create"} if expect == MISSING else {"IfMatch": expect}
    try:
        path.fs.pipe_file(path.path, body, **condition)
    except (FileExistsError, OSError) as err:
        if manifest_version(root, conversation_id) != expect:
            raise LostRace(f"conversation {conversation_id!r}: another build published while this one was publishing "
                           f"(the manifest changed under it: {type(err).__name__}); nothing of this build was published") from None
        raise


@contextlib.contextmanager
def publish_lock(root, conversation_id: str) -> Iterator[None]:
    """One publisher of a conversation at a time, so two runs finishing together cannot lose each
    other's tables. Local stores: a lock file. Object stores have no such lock; there the manifest's
    write is conditional (``write_manifest``'s ``expect``), so the loser of a race is told."""
    with exclusive(manifest_path(root, conversation_id).parent, file_stem(conversation_id)):
        yield


def published_rows(root, conversation_id: str, asset: str = "passages") -> int | None:
    """Rows of a published table as its manifest records them (None: nothing published, or an older manifest)."""
    manifest = read_manifest(root, conversation_id)
    appended = [c for c in (manifest or {}).get("commits") or [] if asset in c.get("rows", {})]
    if appended:
        return appended[-1]["rows"][asset]
    entry = (manifest or {}).get("tables", {}).get(asset) or {}
    return entry.get("rows")
