"""The forget journal: a forget that was asked for and has not finished.

``<root>/_forgets/<conversation stem>.json`` is written before anything else of a forget and removed
as its last step. It holds no text: the conversation, whether the whole of it goes, who is
forgetting and since when. What the forget removes is named by the tombstones, written just after
it. A forget stopped anywhere (``kill -9``, a lost machine, a failed rebuild) leaves the journal,
and the next command of the store that finds it with no writer of the conversation alive finishes
the forget (``memory.writes.Writer.finish``): every step of a forget can be run again, so finishing
is running the same steps again.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone

from upath import UPath

from seem_dagster.store import owner
from seem_dagster.store.files import TEMP_PREFIX, as_root, children, write_bytes_atomic
from seem_dagster.store.keys import file_stem

FOLDER = "_forgets"
SUFFIX = ".json"


def path(root, conversation_id: str) -> UPath:
    return as_root(root) / FOLDER / f"{file_stem(conversation_id)}{SUFFIX}"


def read(root, conversation_id: str) -> dict | None:
    try:
        return json.loads(path(root, conversation_id).read_text())
    except FileNotFoundError:
        return None


def begin(root, conversation_id: str, whole: bool) -> None:
    """Record the forget (a whole-conversation forget stays one until it finishes)."""
    earlier = read(root, conversation_id) or {}
    body = {"conversation_id": conversation_id, "whole": bool(whole or earlier.get("whole")), "writer": owner.me(),
            "asked_at": earlier.get("asked_at") or datetime.now(timezone.utc).isoformat(timespec="seconds")}
    write_bytes_atomic(path(root, conversation_id), json.dumps(body).encode())


def end(root, conversation_id: str) -> None:
    try:
        path(root, conversation_id).unlink()
    except FileNotFoundError:
        pass


def pending(root) -> list[str]:
    """Every conversation with an unfinished forget, sorted."""
    folder = as_root(root) / FOLDER
    names = [p for p in children(folder) if p.name.endswith(SUFFIX) and not p.name.startswith(TEMP_PREFIX)]
    found = []
    for entry in names:
        try:
            found.append(json.loads(entry.read_text())["conversation_id"])
        except (FileNotFoundError, ValueError, KeyError):
            continue  # removed meanwhile (finished), or not a journal
    return sorted(found)


def is_pending(root, conversation_id: str) -> bool:
    return path(root, conversation_id).exists()
