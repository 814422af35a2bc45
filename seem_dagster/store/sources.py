"""Where each conversation comes from: the registry the passages asset reads its input through.

``<root>/_sources/<conversation stem>.json`` is the source of the *published* memory: the input file,
its format and options, and the content fingerprint. A file outside the store is named by its
absolute path (a rebuild started from any folder finds it); a file inside the store (the input log
of `Memory.add`) by its place in the store (``store:_inputs/...``), so a copy of the store reads its
own files, never the original's. It changes only when a build is published (``builds.publish``), so a build that
failed or was killed leaves it, and the memory, as they were. A registration that a build has not
published yet waits in ``<root>/_sources/_pending/<stem>.json``: the next build of the conversation
(`seem build`, a sensor run, the schedule, a re-run in the UI) reads it from there.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from upath import UPath

from seem_dagster.config import IngestConfig
from seem_dagster.store.files import TEMP_PREFIX, as_root, write_bytes_atomic
from seem_dagster.store.keys import file_stem
from seem_dagster.store.manifest import read_manifest

FOLDER = "_sources"
PENDING = "_pending"  # no stem starts with "_", so it cannot clash with a conversation's file


@dataclass(frozen=True)
class Source:
    conversation_id: str
    path: str
    format: str
    fingerprint: str
    ingest: IngestConfig  # the options it was registered with: every rebuild reads it the same way
    questions_path: str | None = None

    def location(self, root) -> str:
        """The input file as a path or URL to read (a store-relative path resolved against ``root``)."""
        return resolve_path(root, self.path)

    def questions_location(self, root) -> str | None:
        return None if self.questions_path is None else resolve_path(root, self.questions_path)

    def to_json(self) -> dict:
        return {"conversation_id": self.conversation_id, "path": self.path, "format": self.format, "fingerprint": self.fingerprint,
                "ingest": self.ingest.model_dump(mode="json"), "questions_path": self.questions_path}

    @classmethod
    def from_json(cls, data: dict) -> Source:
        data = dict(data)
        if "ingest" not in data:  # written before the configuration tree: the options were flat
            data["ingest"] = {"max_turn_chars": data.pop("max_turn_chars"), "allow_empty_turns": data.pop("allow_empty_turns"),
                              "only_speakers": data.pop("speakers", None)}
        return cls(**{**data, "ingest": IngestConfig.model_validate(data["ingest"])})


IN_STORE = "store:"  # a registered path relative to the store's root


def in_store(root, path: str) -> str:
    """``path`` as a source records it: ``store:<relative>`` when it lies under the store, else as given."""
    base = str(as_root(root))
    if "://" not in base and "://" not in path:
        base = os.path.realpath(base)
        real = os.path.realpath(path)
        if real.startswith(base + os.sep):
            return IN_STORE + PurePosixPath(*Path(os.path.relpath(real, base)).parts).as_posix()
    elif path.startswith(base.rstrip("/") + "/"):
        return IN_STORE + path[len(base.rstrip("/")) + 1:]
    return path


def resolve_path(root, recorded: str) -> str:
    if not recorded.startswith(IN_STORE):
        return recorded
    parts = PurePosixPath(recorded[len(IN_STORE):]).parts
    if not parts or ".." in parts or PurePosixPath(recorded[len(IN_STORE):]).is_absolute():
        raise ValueError(f"a registered source names a path outside the store: {recorded!r}")
    target = as_root(root).joinpath(*parts)
    return str(target) if "://" in str(target) else str(Path(target.path).resolve())


def source_path(root, conversation_id: str) -> UPath:
    return as_root(root) / FOLDER / f"{file_stem(conversation_id)}.json"


def pending_path(root, conversation_id: str) -> UPath:
    return as_root(root) / FOLDER / PENDING / f"{file_stem(conversation_id)}.json"


def _write(path: UPath, source: Source) -> None:
    write_bytes_atomic(path, json.dumps(source.to_json(), indent=2, sort_keys=True).encode())


def _read(path: UPath) -> Source | None:
    try:
        return Source.from_json(json.loads(path.read_text()))
    except FileNotFoundError:
        return None


def published_source(root, conversation_id: str) -> Source | None:
    """The source of the published memory: the manifest's (written with it), else the registry file
    of a store written before manifests."""
    manifest = read_manifest(root, conversation_id)
    if manifest is not None and manifest.get("source"):
        return Source.from_json(manifest["source"])
    return _read(source_path(root, conversation_id))


def read_source(root, conversation_id: str) -> Source:
    """The source of the published memory."""
    source = published_source(root, conversation_id)
    if source is None:
        raise FileNotFoundError(
            f"conversation {conversation_id!r} has no registered input under {as_root(root)}; "
            "add it with `seem build --input ...` or drop its file into the inbox"
        )
    return source


def source_to_build(root, conversation_id: str) -> Source:
    """What the next build of the conversation reads: the registration waiting to be published, else
    the published source."""
    pending = _read(pending_path(root, conversation_id))
    return pending if pending is not None else read_source(root, conversation_id)


def register(root, source: Source) -> tuple[str, bool]:
    """Record ``source`` for the next build. Returns its status against the published source ("new",
    "changed" or "unchanged") and whether this very registration was already waiting (a build of it
    was asked for before and has not been published)."""
    published = published_source(root, source.conversation_id)
    if published == source:
        clear_pending(root, source.conversation_id)
        return "unchanged", False
    path = pending_path(root, source.conversation_id)
    waiting = _read(path) == source
    if not waiting:
        _write(path, source)
    return ("new" if published is None else "changed"), waiting


def clear_pending(root, conversation_id: str, only_if: Source | None = None) -> None:
    """Remove the waiting registration (when ``only_if`` is given: only if it still is that one)."""
    path = pending_path(root, conversation_id)
    if only_if is not None and _read(path) != only_if:
        return
    try:
        path.unlink()
    except FileNotFoundError:
        pass


def write_published(root, source: Source) -> None:
    """The registry file of the published memory (called by the publish, after the manifest)."""
    path = source_path(root, source.conversation_id)
    if _read(path) != source:
        _write(path, source)


def registered_conversations(root) -> list[str]:
    """Every conversation with a published memory in the store, sorted (its registry file is written on publish)."""
    folder = as_root(root) / FOLDER
    if not folder.exists():
        return []
    found = []
    for path in folder.iterdir():
        if path.name.endswith(".json") and not path.name.startswith(TEMP_PREFIX):
            found.append(json.loads(path.read_text())["conversation_id"])
    return sorted(found)
