"""The store's own input of a conversation: the turns `Memory.add` received, as a JSONL file.

``<root>/_inputs/<conversation stem>.jsonl`` is registered as the conversation's source like any
input file, so the same Dagster job builds it, and the schedule, the sensor's registry and a
backfill treat it like any other input. Each ``add`` writes the whole file again, atomically (a
reader sees the old log or the new one; on an object store, one PUT): every build reads the whole
input anyway, so rewriting it costs the order of what the build that follows reads. Writers of one
conversation take turns under a lock on local stores; an object store has no lock, so there one
process at a time may add to a conversation (the last of two simultaneous adds would win).
"""

from __future__ import annotations

from collections.abc import Callable

from upath import UPath

from seem_dagster.store.files import as_root, jsonl_lines, remove_stale_temps, write_bytes_atomic
from seem_dagster.store.keys import file_stem
from seem_dagster.store.locks import exclusive

FOLDER = "_inputs"
SUFFIX = ".jsonl"


def log_path(root, conversation_id: str) -> UPath:
    return as_root(root) / FOLDER / f"{file_stem(conversation_id)}{SUFFIX}"


def source_path(root, conversation_id: str) -> str:
    """The log as a registered source names it: absolute for a local store (a rebuild may start from
    any folder), the URL for an object store."""
    path = log_path(root, conversation_id)
    if "://" in str(path):
        return str(path)
    from pathlib import Path

    return str(Path(path.path).resolve())


def writing(root, conversation_id: str):
    """Held while a log is read, extended and written (see the module's note on object stores)."""
    return exclusive(as_root(root) / FOLDER, file_stem(conversation_id))


def read(root, conversation_id: str) -> str:
    """The log's text ("" when the conversation has no log)."""
    return read_bytes(root, conversation_id).decode("utf-8")


def read_bytes(root, conversation_id: str) -> bytes:
    try:
        return log_path(root, conversation_id).read_bytes()
    except FileNotFoundError:
        return b""


def write(root, conversation_id: str, content: str | bytes) -> None:
    write_bytes_atomic(log_path(root, conversation_id), content.encode("utf-8") if isinstance(content, str) else content)


def rewrite(root, conversation_id: str, keep: Callable[[int, str], bool]) -> int:
    """Write the log again with only the lines ``keep(line number, line)`` accepts; returns how many
    lines went. Call it under ``writing``. Temp files of killed writers of the log go too."""
    text = read(root, conversation_id)
    if not text:
        return 0
    lines = jsonl_lines(text, keepends=True)
    kept = [line for number, line in enumerate(lines, start=1) if keep(number, line)]
    if len(kept) != len(lines):
        if kept:
            write(root, conversation_id, "".join(kept))
        else:
            remove(root, conversation_id)
    return len(lines) - len(kept)


def remove(root, conversation_id: str) -> bool:
    path = log_path(root, conversation_id)
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    finally:
        if "://" not in str(path):
            from pathlib import Path

            remove_stale_temps(Path(path.path))
    return True
