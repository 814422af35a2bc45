"""Register an input file's conversations in a store: validate the whole file, then record sources.

Shared by ``seem build`` and the inbox sensor, so both decide "new / changed / unchanged" alike.
"""

from __future__ import annotations

from dataclasses import dataclass

from seem_dagster.config import IngestConfig
from seem_dagster.ingest import load_input
from seem_dagster.store.sources import Source, read_source, source_path, write_source


@dataclass(frozen=True)
class Registered:
    conversation_id: str
    status: str  # "new" | "changed" | "unchanged"
    fingerprint: str
    passages: int
    skipped: tuple[str, ...]
    excluded: int = 0  # turns by speakers outside IngestConfig.only_speakers


def register_file(
    root,
    path: str,
    fmt: str | None = None,
    options: IngestConfig | None = None,
    *,
    questions: str | None = None,
    conversations: list[str] | None = None,
) -> list[Registered]:
    """Raises InputError before anything is written when any part of the file is bad."""
    options = options or IngestConfig()
    parsed = load_input(path, fmt, options, questions=questions, conversations=conversations)
    entries = []
    for conv in parsed:
        source = Source(
            conversation_id=conv.conversation_id,
            path=str(path),
            format=conv.source_format,
            fingerprint=conv.fingerprint,
            ingest=options,
            questions_path=None if questions is None else str(questions),
        )
        if source_path(root, conv.conversation_id).exists():
            status = "unchanged" if read_source(root, conv.conversation_id) == source else "changed"
        else:
            status = "new"
        entries.append((source, Registered(conv.conversation_id, status, source.fingerprint,
                                           conv.passages.height, tuple(conv.skipped), conv.excluded)))
    # Only after every conversation parsed: write the registry entries.
    for source, reg in entries:
        if reg.status != "unchanged":
            write_source(root, source)
    return [reg for _, reg in entries]
