"""Build reuse: every conversation's memory built once through ``Memory``, or reused when current.

A conversation's memory is reused only when the stored tables agree with each other and each one's
build record (its stage settings and code versions, ``pipeline.stages``) equals what the current
configuration would make, and its input is unchanged since registration; any setting that shapes the
memory (ingest, extraction, fusion, synonyms, the model) therefore rebuilds it. A memory built outside
`seem eval` (`seem build`, a schedule, the Dagster UI) is reused the same way: a published memory
passed every blocking check. The reused build's stage timings are carried over (marked ``cached``)
when an evaluation build made it; one built elsewhere left none, and the build figures say how many
conversations they leave out.
"""

from __future__ import annotations

import json

from seem_dagster.memory import Memory
from seem_dagster.pipeline.stages import MEMORY_TABLES
from seem_dagster.store.files import as_root, write_bytes_atomic
from seem_dagster.store.keys import file_stem
from seem_dagster.store.snapshot import read_footers


def record_path(store: str, conversation_id: str):
    """``<store>/_eval/<conversation>.json``: a path in the store, a local folder or an object store."""
    return as_root(store) / "_eval" / f"{file_stem(conversation_id)}.json"


def build_timings(store: str, conversation_id: str) -> dict | None:
    """The record an evaluation build left for the published memory (its stage timings), or None when
    none did: the memory was built by `seem build`, a schedule or the Dagster UI, or the record is of
    an older build than the one published."""
    path = record_path(store, conversation_id)
    record = json.loads(path.read_text()) if path.exists() else {}
    builds = {f.get("build_id") for f in read_footers(store, conversation_id, MEMORY_TABLES).values()}
    return record if builds == {record.get("build_id")} else None


def build_memories(memory: Memory, data: str, benchmark: str, conversations: list[str] | None = None, progress: bool = True) -> dict:
    """Build (or reuse) every conversation's memory of ``data`` through ``memory``: conversation ->
    its passages, the turns left out and, when this evaluation built it (or an earlier one did),
    its stage seconds (``timed``); ``cached`` when it was reused."""
    from seem_dagster.memory.writes import BuildsFailed

    store = memory.store
    try:
        results = memory.add_file(data, benchmark, conversations=conversations, progress=progress)
    except BuildsFailed as err:
        for r in err.results:
            if r.status == "failed":
                record_path(store, r.conversation_id).unlink(missing_ok=True)
        failed = [r for r in err.results if r.status == "failed"]
        raise RuntimeError(f"{len(failed)} memory builds failed; {str(err).split('; ', 1)[1]}") from None
    builds: dict[str, dict] = {}
    for r in results:
        if r.status in ("empty", "forgotten"):
            continue
        if r.status == "current":
            # A published memory passed every blocking check, whoever built it: rebuilding one made
            # by `seem build` only to time it would cost a Dagster run per conversation.
            timed = build_timings(store, r.conversation_id)
            builds[r.conversation_id] = {**(timed or {"passages": r.passages, "excluded_turns": r.excluded,
                                                      "skipped_turns": list(r.skipped)}), "cached": True, "timed": timed is not None}
            continue
        entry = {"build_id": r.build_id, "passages": r.passages, "excluded_turns": r.excluded, "skipped_turns": list(r.skipped),
                 "stage_seconds": r.step_seconds}
        write_bytes_atomic(record_path(store, r.conversation_id), json.dumps(entry, indent=2).encode())
        builds[r.conversation_id] = {**entry, "cached": False, "timed": True}
    return builds
