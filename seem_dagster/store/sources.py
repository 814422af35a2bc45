"""Where each conversation comes from: the registry the passages asset reads its input through.

``<root>/_sources/<conversation stem>.json`` is the source of the *published* memory: the input file
(an absolute path, so a rebuild started from anywhere finds it), its format and options, and the
content fingerprint. It changes only when a build is published (``builds.publish``), so a build that
failed or was killed leaves it, and the memory, as they were. A registration that a build has not
published yet waits in ``<root>/_sources/_pending/<stem>.json``: the next build of the conversation
(`seem build`, a sensor run, the schedule, a re-run in the UI) reads it from there.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

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
