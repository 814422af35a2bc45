"""Where each conversation comes from: the registry the passages asset reads its input through.

``<root>/_sources/<conversation stem>.json`` holds the input file, its format and options, and the
conversation's content fingerprint. The CLI and the inbox sensor write it (after the whole input
file has validated); the schedule and reruns read it, so a partition can always be rebuilt.
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass

from upath import UPath

from seem_dagster.config import IngestConfig
from seem_dagster.store.keys import file_stem
from seem_dagster.store.snapshot import TEMP_PREFIX, as_root

FOLDER = "_sources"


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


def write_source(root, source: Source) -> None:
    path = source_path(root, source.conversation_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.parent / f"{TEMP_PREFIX}{path.name}.{uuid.uuid4().hex}"
    temp.write_text(json.dumps(source.to_json(), indent=2, sort_keys=True))
    if getattr(path, "protocol", "") in ("", "file", "local"):
        os.replace(temp.path, path.path)
    else:
        temp.fs.mv(temp.path, path.path)


def read_source(root, conversation_id: str) -> Source:
    path = source_path(root, conversation_id)
    if not path.exists():
        raise FileNotFoundError(
            f"conversation {conversation_id!r} has no registered input under {as_root(root)}; "
            "add it with `seem build --input ...` or drop its file into the inbox"
        )
    return Source.from_json(json.loads(path.read_text()))


def registered_conversations(root) -> list[str]:
    """Every conversation registered in the store (built or not), sorted."""
    folder = as_root(root) / FOLDER
    if not folder.exists():
        return []
    found = []
    for path in folder.iterdir():
        if path.name.endswith(".json") and not path.name.startswith(TEMP_PREFIX):
            found.append(json.loads(path.read_text())["conversation_id"])
    return sorted(found)
