"""Where each conversation comes from: the registry the passages asset reads its input through.

``<root>/_sources/<conversation stem>.json`` holds the input file, its format and options, and the
conversation's content fingerprint. The CLI and the inbox sensor write it (after the whole input
file has validated); the schedule and reruns read it, so a partition can always be rebuilt.
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import asdict, dataclass

from upath import UPath

from seem_dagster.store.keys import file_stem
from seem_dagster.store.snapshot import TEMP_PREFIX, as_root

FOLDER = "_sources"


@dataclass(frozen=True)
class Source:
    conversation_id: str
    path: str
    format: str
    fingerprint: str
    max_turn_chars: int
    allow_empty_turns: bool
    questions_path: str | None = None
    speakers: list[str] | None = None

    def ingest_options(self):
        from seem_dagster.ingest import IngestOptions

        return IngestOptions(self.max_turn_chars, self.allow_empty_turns, tuple(self.speakers) if self.speakers else None)


def source_path(root, conversation_id: str) -> UPath:
    return as_root(root) / FOLDER / f"{file_stem(conversation_id)}.json"


def write_source(root, source: Source) -> None:
    path = source_path(root, source.conversation_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.parent / f"{TEMP_PREFIX}{path.name}.{uuid.uuid4().hex}"
    temp.write_text(json.dumps(asdict(source), indent=2, sort_keys=True))
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
    return Source(**json.loads(path.read_text()))
