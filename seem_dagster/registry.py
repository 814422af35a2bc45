"""Register an input file's conversations in a store: validate the whole file, then record sources.

Shared by ``seem build`` and the inbox sensor, so both decide "new / changed / unchanged" alike; and
whether a conversation's published memory is what a build would make now (``why_rebuild``), so
``seem build``, the nightly schedule and ``seem eval`` skip the same conversations.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from seem_dagster.config import IngestConfig, SeemConfig
from seem_dagster.forgetting.tombstones import drop_forgotten
from seem_dagster.ingest import InputError, load_input
from seem_dagster.pipeline.stages import MEMORY_TABLES, SOURCE_ASSETS, stage_config
from seem_dagster.store.manifest import read_manifest
from seem_dagster.store.snapshot import SnapshotError, check_consistent, read_footers
from seem_dagster.store.sources import Source, in_store, pending_path, published_source, read_source, register

EMPTY = "empty"
FORGOTTEN = "forgotten"  # every turn of it was forgotten: nothing to build


@dataclass(frozen=True)
class Registered:
    conversation_id: str
    status: str  # "new" | "changed" | "unchanged"; "empty": every turn was empty and skipped, "forgotten": every turn
    # was forgotten (Memory.forget): nothing registered for either
    fingerprint: str
    passages: int
    skipped: tuple[str, ...]
    excluded: int = 0  # turns by speakers outside IngestConfig.only_speakers
    waiting: bool = False  # this registration was already waiting for a build (asked for, not published yet)
    forgotten: int = 0  # turns left out because they were forgotten (their tombstones match them)


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
    forgotten = {conv.conversation_id: drop_forgotten(root, conv) for conv in parsed}
    gone = [conv for conv in parsed if conv.passages.is_empty()]
    parsed = [conv for conv in parsed if not conv.passages.is_empty()]
    sources = [
        Source(
            conversation_id=conv.conversation_id,
            path=in_store(root, absolute(path)),
            format=conv.source_format,
            fingerprint=conv.fingerprint,
            ingest=options,
            questions_path=None if questions is None else in_store(root, absolute(questions)),
        )
        for conv in parsed
    ]
    # Only after every conversation parsed: write the registry entries.
    out = []
    for conv, source in zip(parsed, sources):
        status, waiting = register(root, source)
        out.append(Registered(conv.conversation_id, status, source.fingerprint, conv.passages.height, tuple(conv.skipped),
                              conv.excluded, waiting, forgotten[conv.conversation_id]))
    out += [Registered(conv.conversation_id, EMPTY, conv.fingerprint, 0, tuple(conv.skipped)) for conv in emptied]
    out += [Registered(conv.conversation_id, FORGOTTEN, conv.fingerprint, 0, tuple(conv.skipped), conv.excluded,
                       forgotten=forgotten[conv.conversation_id]) for conv in gone]
    return out


def to_build(registered: list[Registered]) -> list[Registered]:
    """The registered conversations there is something to build for."""
    return [r for r in registered if r.status not in (EMPTY, FORGOTTEN)]


def absolute(path) -> str:
    """A local path made absolute and resolved (a rebuild may start from any folder); a URL as given."""
    text = str(path)
    return text if "://" in text else str(Path(text).resolve())


def why_rebuild(root, conversation_id: str, config: SeemConfig) -> str | None:
    """None when the published memory is what ``config`` would build from its registered source: no
    other registration waits for a build, every table is there and all come from one build, and each
    was made with the stage settings and code versions of now. Else why a build is needed. (Whether
    the input file changed since is ``inputs_changed``'s question.) A published memory passed every
    blocking check: a failed check fails its step, and nothing of that build is published."""
    if pending_path(root, conversation_id).exists():
        return "a registration is waiting for its build"
    try:
        footers = read_footers(root, conversation_id, MEMORY_TABLES)
        check_consistent(conversation_id, footers)
        source = read_source(root, conversation_id).to_json()
    except (SnapshotError, FileNotFoundError) as err:
        return str(err)
    # Appends publish their source in the manifest; the base build's tables keep the one it read.
    base_source = (read_manifest(root, conversation_id) or {}).get("base_source")
    for asset, footer in footers.items():
        recorded = base_source if base_source is not None and asset in SOURCE_ASSETS else source
        if footer.get("stage") != json.loads(json.dumps(stage_config(asset, config, recorded))):
            return f"{asset} was built with other settings or code"
    return None


def inputs_changed(root, conversation_ids: list[str]) -> dict[str, str]:
    """The conversations whose input file no longer holds what their published memory was built
    from, each with why (changed content, gone from the file, or a file that cannot be read: its
    build then reports the error). Each file is read once, however many conversations it holds."""
    groups: dict[tuple, list[tuple[str, Source]]] = {}
    out: dict[str, str] = {}
    for cid in conversation_ids:
        source = published_source(root, cid)
        if source is None:
            out[cid] = "no published memory"
            continue
        key = (source.location(root), source.format, source.questions_location(root), json.dumps(source.ingest.model_dump(mode="json"), sort_keys=True))
        groups.setdefault(key, []).append((cid, source))
    for (path, fmt, questions, _), members in groups.items():
        try:
            loaded = load_input(path, fmt, members[0][1].ingest, questions=questions, emptied=[])
            for conv in loaded:
                drop_forgotten(root, conv)
            parsed = {c.conversation_id: c.fingerprint for c in loaded if not c.passages.is_empty()}
        except (InputError, OSError) as err:
            out |= {cid: f"{path} cannot be read as it was: {err}" for cid, _ in members}
            continue
        for cid, source in members:
            if cid not in parsed:
                out[cid] = f"{path} no longer holds it (or every turn is now empty)"
            elif parsed[cid] != source.fingerprint:
                out[cid] = f"{path} changed since its last build"
    return out
