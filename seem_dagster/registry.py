"""Register an input file's conversations in a store: validate the whole file, then record sources.

Shared by ``seem build`` and the inbox sensor, so both decide "new / changed / unchanged" alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from seem_dagster.config import IngestConfig
from seem_dagster.ingest import load_input
from seem_dagster.store.sources import Source, register

EMPTY = "empty"


@dataclass(frozen=True)
class Registered:
    conversation_id: str
    status: str  # "new" | "changed" | "unchanged"; "empty": every turn was empty and skipped, nothing registered
    fingerprint: str
    passages: int
    skipped: tuple[str, ...]
    excluded: int = 0  # turns by speakers outside IngestConfig.only_speakers
    waiting: bool = False  # this registration was already waiting for a build (asked for, not published yet)


def register_file(
    root,
    path: str,
    fmt: str | None = None,
    options: IngestConfig | None = None,
    *,
    questions: str | None = None,
    conversations: list[str] | None = None,
) -> list[Registered]:
    """Raises InputError before anything is written when any part of the file is bad.

    Each conversation's source waits for its next build; "new", "changed" and "unchanged" compare it
    with the source of the published memory, so a build that failed or was killed is built again.
    """
    options = options or IngestConfig()
    emptied = []
    parsed = load_input(path, fmt, options, questions=questions, conversations=conversations, emptied=emptied)
    sources = [
        Source(
            conversation_id=conv.conversation_id,
            path=absolute(path),
            format=conv.source_format,
            fingerprint=conv.fingerprint,
            ingest=options,
            questions_path=None if questions is None else absolute(questions),
        )
        for conv in parsed
    ]
    # Only after every conversation parsed: write the registry entries.
    out = []
    for conv, source in zip(parsed, sources):
        status, waiting = register(root, source)
        out.append(Registered(conv.conversation_id, status, source.fingerprint, conv.passages.height, tuple(conv.skipped),
                              conv.excluded, waiting))
    out += [Registered(conv.conversation_id, EMPTY, conv.fingerprint, 0, tuple(conv.skipped)) for conv in emptied]
    return out


def to_build(registered: list[Registered]) -> list[Registered]:
    """The registered conversations there is something to build for."""
    return [r for r in registered if r.status != EMPTY]


def absolute(path) -> str:
    """A local path made absolute and resolved (a rebuild may start from any folder); a URL as given."""
    text = str(path)
    return text if "://" in text else str(Path(text).resolve())
