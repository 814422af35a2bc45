"""`Memory.add`'s append: new turns published as a commit on the conversation's memory, in process.

When the published memory is current (built from the input log with today's settings, nothing
waiting to be built), the turns an add logged are built here, without a Dagster run: the build's own
steps (``pipeline``) run on the conversation as the input log now holds it, and their caches make
them do only the new work: the extraction and the embedding of the new turns, their frames fused
into the saved episodes, their entities compared for synonyms. What differs from the published
memory (the new rows, and the rows the new turns change: a property's ``valid_to``, an episode that
gained a frame, an entity's passages, a fact edge's weight) is published as one commit
(``store.commits``). The memory a reader sees is therefore the one a build of the same input would
publish, table for table; compaction (a build) makes it the base again.

Not done yet (issue 55): each step still reads and derives its whole table in memory (ms per
thousand turns, no model work), and a reader makes its whole index again after each commit (it
reads only the new commit's files).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import polars as pl

from seem_dagster import faults
from seem_dagster.config import SeemConfig
from seem_dagster.memory.published import manifest_key
from seem_dagster.pipeline.episodes import build_episodes
from seem_dagster.pipeline.extract import extract_conversations
from seem_dagster.pipeline.graph import build_graph
from seem_dagster.pipeline.index import build_retrieval_index
from seem_dagster.pipeline.ingest import read_registered
from seem_dagster.pipeline.stages import MEMORY_TABLES
from seem_dagster.store import builds, commits, sources
from seem_dagster.store.cache import ConversationCache
from seem_dagster.store.manifest import read_manifest
from seem_dagster.store.snapshot import read_published


@dataclass
class Appended:
    commit_id: str
    passages: int  # the memory's turns after the commit
    new_turns: int
    extracted: int
    changed_rows: dict[str, int]
    seconds: float
    manifest: dict  # the manifest the commit published
    tables: dict[str, pl.DataFrame]  # the memory as a reader of that manifest sees it (MEMORY_TABLES)


def why_not(root, conversation_id: str, config: SeemConfig) -> str | None:
    """Why the next add of the conversation is built by a Dagster run instead of appended (None: it is
    appended). Called before the add writes anything, with the conversation's writer lock held."""
    from seem_dagster.registry import why_rebuild

    if not config.store.append:
        return "store.append is off"
    if config.llm.enabled:
        return "a language model extracts: appends are built by the build job (one batch per run)"
    manifest = read_manifest(root, conversation_id)
    if manifest is None:
        return "no memory is published yet"
    if len(commits.commits_of(manifest)) >= config.store.compact_after:
        return f"{config.store.compact_after} commits since the last build (store.compact_after): compacting"
    source = sources.published_source(root, conversation_id)
    if source is None or source.format != "jsonl":
        return "the memory was not built from the store's input log"
    return why_rebuild(root, conversation_id, config)


def append(root, conversation_id: str, config: SeemConfig, new_turns: int, held: tuple[str, dict] | None = None) -> Appended:
    """Build what the input log holds beyond the published memory and publish it as one commit
    (raises ``commits.CommitError`` when another writer published meanwhile: nothing published).
    ``held``: (memory key, tables) of the memory as this process last saw it, used when it is still
    the published one instead of reading it again."""
    started = time.perf_counter()
    manifest = read_manifest(root, conversation_id)
    if held is not None and manifest is not None and held[0] == manifest_key(manifest):
        current = held[1]
    else:
        current, manifest = read_published(root, conversation_id, MEMORY_TABLES)
    source, conversation, _ = read_registered(root, conversation_id)
    record = {**source.to_json(), "fingerprint": conversation.fingerprint}
    passages = conversation.passages
    made, extracted = _build(root, conversation_id, passages, conversation.questions, config)
    made = {asset: frame.select(current[asset].columns) for asset, frame in made.items()}
    tables = {asset: commits.changes(current[asset], frame, commits.KEYS[asset]) for asset, frame in made.items()}
    rows = {asset: frame.height for asset, frame in made.items()}
    commit_id = commits.new_id()
    builds.claim(root, conversation_id, commit_id, in_process=True)  # a commit killed before its publish is this process's to tidy
    done = commits.publish_commit(root, conversation_id, commit_id, manifest["build_id"], len(commits.commits_of(manifest)), tables,
                                  rows=rows, source=record, turns=new_turns)
    published = sources.Source.from_json(source.to_json())
    sources.write_published(root, published)
    sources.clear_pending(root, conversation_id, only_if=published)
    faults.point("append.after_sources")
    seen = {a: commits.apply(current[a], changed, gone, commits.KEYS[a]) for a, (changed, gone) in tables.items()}
    return Appended(done["commits"][-1]["id"], passages.height, new_turns, extracted,
                    {a: f.height + len(d) for a, (f, d) in tables.items() if f.height or d}, time.perf_counter() - started, done, seen)


def _build(root, conversation_id: str, passages: pl.DataFrame, questions: pl.DataFrame, config: SeemConfig
           ) -> tuple[dict[str, pl.DataFrame], int]:
    """Every table of the memory, made by the build's own steps from ``passages`` (their caches hold
    the work of every turn already built), and how many passages were extracted (not cached)."""
    cache = ConversationCache(root, conversation_id)
    extracted = extract_conversations(root, {conversation_id: passages}, config)[conversation_id]
    episodes = build_episodes(cache, extracted.frames, passages, config, facts=extracted.facts)
    graph = build_graph(cache, extracted.facts, config)
    index = build_retrieval_index(cache, passages, extracted.facts, config)
    made = {"passages": passages, "questions": questions, "event_frames": extracted.frames, "facts": extracted.facts,
            "properties": extracted.properties.table, "llm_calls": extracted.calls, "episodes": episodes.table,
            "entities": graph.entities, "graph_edges": graph.edges, "retrieval_index": index.table}
    return made, extracted.extracted
