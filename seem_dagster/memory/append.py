"""`Memory.add`'s append: new turns published as a commit on the conversation's memory, in process.

When the published memory is current (built from the input log with today's settings, nothing
waiting to be built), the turns an add logged are built here, without a Dagster run, by the append's
own steps (``memory.increment``): they extract, embed, fuse and link only the new turns, continuing
from what the writer keeps of the memory, and give the rows a build of the same input would add or
change (a property's ``valid_to``, an episode that gained a frame, an entity's passages, a fact
edge's weight). When the new turns do not fit those steps (they come before a turn already built,
or name a new speaker), the build's own steps (``pipeline``) run on the whole conversation in
process instead, their caches doing only the new model work, and what differs from the published
memory is what is published. Either way the rows are published as one commit (``store.commits``):
the memory a reader sees is the one a build of the same input would publish, table for table, and
compaction (a build) makes it the base again.

Not done yet (issue 55): an add still rewrites the whole input log (atomically), the first add of a
process reads the whole memory and log, and a reader makes its whole index again at its first read
after a commit (it reads only the new commit's files).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import polars as pl

from seem_dagster import faults
from seem_dagster.config import SeemConfig
from seem_dagster.memory import increment
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
    live: increment.Live  # the memory as a reader of that manifest sees it, and the state the next append continues from
    how: str  # "by step", or "whole conversation: <why the steps could not take the new turns alone>"


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


def append(root, conversation_id: str, config: SeemConfig, new_turns: int, held: increment.Live | None = None) -> Appended:
    """Build what the input log holds beyond the published memory and publish it as one commit
    (raises ``commits.CommitError`` when another writer published meanwhile: nothing published).
    ``held``: what this process kept of the memory it last saw, used when that is still the published
    one instead of reading it again; it is advanced by the append (a caller drops it on an error)."""
    started = time.perf_counter()
    manifest = read_manifest(root, conversation_id)
    if held is not None and manifest is not None and held.key == manifest_key(manifest):
        live = held
    else:
        current, manifest = read_published(root, conversation_id, MEMORY_TABLES)
        live = increment.Live(manifest_key(manifest), commits.Merging(current))
    current = live.tables
    source, conversation, _ = read_registered(root, conversation_id)
    record = {**source.to_json(), "fingerprint": conversation.fingerprint}
    passages = conversation.passages
    cache = ConversationCache(root, conversation_id)
    try:
        new = increment.new_turns(live, passages)
        made = increment.increment(live, new, cache, config)
        tables, added, extracted, how = made.tables, made.added, made.extracted, "by step"
    except increment.Unfit as why:
        live = increment.Live(live.key, current)  # the steps' state is made again from the tables the build gives
        whole, extracted = _build(root, conversation_id, passages, conversation.questions, config)
        tables = {asset: commits.changes(current[asset], frame.select(current[asset].columns), commits.KEYS[asset])
                  for asset, frame in whole.items()}
        added = {a: rows.join(current[a].select(*commits.KEYS[a]), on=list(commits.KEYS[a]), how="anti", nulls_equal=True).height
                 for a, (rows, _) in tables.items()}
        how = f"whole conversation: {why}"
    merged = current.then(tables, added)
    commit_id = commits.new_id()
    builds.claim(root, conversation_id, commit_id, in_process=True)  # a commit killed before its publish is this process's to tidy
    done = commits.publish_commit(root, conversation_id, commit_id, manifest["build_id"], len(commits.commits_of(manifest)), tables,
                                  rows=merged.heights(), source=record, turns=new_turns)
    published = sources.Source.from_json(source.to_json())
    sources.write_published(root, published)
    sources.clear_pending(root, conversation_id, only_if=published)
    faults.point("append.after_sources")
    live.tables, live.key = merged, manifest_key(done)
    return Appended(done["commits"][-1]["id"], passages.height, new_turns, extracted,
                    {a: f.height + len(d) for a, (f, d) in tables.items() if f.height or d}, time.perf_counter() - started, done, live, how)


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
