"""An append's steps, each doing only what the new turns need: the rows they add, and the rows of the
memory they change.

A build derives every table from the whole conversation; these steps derive the same rows from the
new turns and from ``Live``, what the writer keeps of the memory it last saw (its tables, and the
state the steps continue from: the episodes being fused, the entities, the edge counts), so an
append's cost follows the turns it adds, not the memory's size. The result is the build's, row for
row (tests/test_append.py compares them with a build of the same input), under the conditions a
build's own incremental steps have: the new turns come after every turn built (in their sessions and
in time), and name no new speaker (every turn's extraction reads the conversation's speakers).
``Unfit`` says when they do not hold; the append then runs the build's steps on the whole
conversation instead (``memory.append``).

The state is made from the tables the first time an append of the conversation needs it in a
process (milliseconds per thousand turns, and the saved vectors of the entity names and, with
fusion on summaries, of the frames) and kept up to date by every append after that.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from seem_dagster import backends
from seem_dagster.config import SeemConfig
from seem_dagster.embeddings import CachedEmbedder
from seem_dagster.episodic.extraction.interface import PassageInput, to_tables
from seem_dagster.episodic.fusion import Episode, FusionStats, fuse, member_index, rebuild_state
from seem_dagster.episodic.tables import episodes_table, frame_items
from seem_dagster.graph.build import FACT as FACT_EDGE
from seem_dagster.graph.build import MENTION, SYNONYM
from seem_dagster.graph.entities import entity_id, normalise, synonym_edges
from seem_dagster.pipeline.embedding import cached_embedder, save_vectors
from seem_dagster.pipeline.episodes import frame_texts
from seem_dagster.pipeline.extract import cache_name
from seem_dagster.pipeline.graph import record_comparisons, synonyms_name
from seem_dagster.pipeline.index import index_rows
from seem_dagster.properties.derive import candidates, link
from seem_dagster.retrieval.index import PASSAGE
from seem_dagster.schemas import Embeddings, Entities, Episodes, EventFrames, Facts, GraphEdges, Passages, Properties, table
from seem_dagster.store.cache import ConversationCache


class Unfit(Exception):
    """The new turns cannot be appended step by step (the message says why): the whole conversation is built instead."""


@dataclass
class _Entity:
    aliases: set[str]
    passages: list[str]


@dataclass
class Live:
    """The memory a writer last saw of one conversation (``key``: its manifest's ``manifest_key``) and
    what the append's steps continue from, made on first use."""

    key: str
    tables: dict[str, pl.DataFrame]
    episodes: list[Episode] | None = None
    members: dict | None = None
    last_order: tuple | None = None  # the latest frame fused: (timestamp, session index, turn index)
    entities: dict[str, _Entity] | None = None
    entity_ids: list[str] = field(default_factory=list)
    entity_vectors: np.ndarray | None = None
    synonyms: list[tuple[str, str, float]] = field(default_factory=list)
    edge_counts: Counter | None = None  # (source, target, kind) -> weight of fact and mention edges


@dataclass
class Increment:
    tables: dict[str, tuple[pl.DataFrame, list]]  # per table: the rows added or replaced, keys deleted (none here)
    extracted: int


def new_turns(live: Live, passages: pl.DataFrame) -> pl.DataFrame:
    """The turns of ``passages`` (the conversation as its input now reads) past the memory's; raises
    ``Unfit`` unless the memory's turns are its first rows, unchanged, and the new ones come after them."""
    old = live.tables["passages"]
    if passages.height <= old.height:
        raise Unfit("the input holds no turn past the memory's")
    if not passages.head(old.height).equals(old):
        raise Unfit("the memory's turns are not the input's first ones as they read now")
    new = passages.slice(old.height)
    position = [(s, t) for s, t in new.select(Passages.session_index, Passages.turn_index).iter_rows()]
    last = old.select(Passages.session_index, Passages.turn_index).row(old.height - 1) if old.height else (-1, -1)
    if position != sorted(position) or position[0] <= tuple(last):
        raise Unfit("a new turn comes before a turn already built")
    if not set(new[Passages.speaker].unique().to_list()) <= set(old[Passages.speaker].unique().to_list()):
        raise Unfit("a new turn names a new speaker (every turn's extraction reads the speakers)")
    return new


def increment(live: Live, new: pl.DataFrame, cache: ConversationCache, config: SeemConfig) -> Increment:
    """The rows that turn the memory of ``live`` into the memory of its turns and ``new``
    (``new_turns``); the caches gain the new turns' extraction, vectors and synonym comparisons, as a
    build's would. ``live``'s state is advanced to the new memory (its tables are not: the caller
    applies the rows once they are published); a caller that does not publish them, or meets an
    error, must drop it."""
    t = live.tables
    speakers = tuple(sorted(t["passages"][Passages.speaker].unique().to_list()))
    inputs = _inputs(t["passages"], new, speakers)
    extractor = backends.extractor(config.extraction.extractor, config.extraction.parse_processes)
    results = extractor.extract(inputs)
    name = cache_name(extractor)
    cache.append_kv("extraction", name, {inp.cache_key(extractor.name, extractor.version): r.to_json() for inp, r in zip(inputs, results)})
    frames, facts = to_tables(inputs, results, extractor.name)
    embedder = CachedEmbedder(backends.embedder(config.extraction.embedder))  # new texts: nothing to look up
    index, _ = index_rows(embedder, new, facts, config.extraction.fact_vectors == "pooled")
    episodes = _episodes(live, frames, new, index, embedder, cache, config)
    save_vectors(cache, embedder)
    entities, edges = _graph(live, facts, cache, config)
    tables = {"passages": new, "event_frames": frames, "facts": facts, "properties": _properties(t, facts, new),
              "episodes": episodes, "entities": entities, "graph_edges": edges, "retrieval_index": index}
    out = {}
    for asset, frame in tables.items():
        frame = frame.select(t[asset].columns)
        if frame.schema != t[asset].schema:
            raise RuntimeError(f"the append's {asset} rows have another schema than the memory's ({frame.schema} against {t[asset].schema})")
        out[asset] = (frame, [])
    return Increment(out, len(inputs))


def _inputs(old: pl.DataFrame, new: pl.DataFrame, speakers: tuple[str, ...]) -> list[PassageInput]:
    """The extraction inputs of the new turns, as ``inputs_from_passages`` makes them from the whole table."""
    previous = old.row(old.height - 1, named=True)
    out = []
    for row in new.iter_rows(named=True):
        same = previous[Passages.session_id] == row[Passages.session_id]
        out.append(PassageInput(row[Passages.passage_id], row[Passages.conversation_id], row[Passages.speaker], row[Passages.text],
                                row[Passages.timestamp], previous[Passages.speaker] if same else None,
                                previous[Passages.text] if same else None, speakers))
        previous = row
    return out


def _properties(t: dict, facts: pl.DataFrame, new: pl.DataFrame) -> pl.DataFrame:
    """The new turns' property rows, and the earlier rows of the histories they join whose end or
    predecessor changes (each single-valued history is linked alone, so only those are linked again)."""
    rows = candidates(facts, new, first_ordinal=t["facts"].height, first_position=t["passages"].height)
    if not rows:
        return t["properties"].clear()
    for k, r in enumerate(rows):
        r["_order"] = (1, k)  # after every earlier row
    touched = {r[Properties.entity_id] + "\x00" + r[Properties.property] for r in rows if r[Properties.single_valued]}
    before = t["properties"].filter(
        pl.col(Properties.single_valued) & (pl.col(Properties.entity_id) + "\x00" + pl.col(Properties.property)).is_in(list(touched)))
    # the stored rows are in the build's order (as ``link`` leaves them): their place is their order
    earlier = [{**r, Properties.valid_to: None, Properties.supersedes: None, "_order": (0, i)} for i, r in enumerate(before.iter_rows(named=True))]
    linked = link(earlier + rows)
    again = linked.head(len(earlier))
    changed = again.filter((again[Properties.valid_to].ne_missing(before[Properties.valid_to]))
                           | (again[Properties.supersedes].ne_missing(before[Properties.supersedes])))
    return pl.concat([changed, linked.slice(len(earlier))])


def _episodes(live: Live, frames: pl.DataFrame, new: pl.DataFrame, index: pl.DataFrame, embedder: CachedEmbedder,
              cache: ConversationCache, config: SeemConfig) -> pl.DataFrame:
    """The new frames fused into the kept episodes: the episodes they start and those they join."""
    if live.episodes is None:
        _start_fusion(live, cache, config)
    if config.fusion.vectors == "passage":  # the passages' vectors, which the index rows hold
        vectors = _vectors_of(index.filter(pl.col(Embeddings.kind) == PASSAGE), frames[EventFrames.passage_id].to_list())
    else:
        vectors = embedder.encode(frame_texts(frames, new, "summary"))
    items = frame_items(frames, new, vectors, speakers=_speakers(live))
    if live.last_order is not None and min(i.order for i in items) < live.last_order:
        raise Unfit("a new turn is dated before a turn already fused into an episode")
    stats = FusionStats()
    live.episodes = fuse(items, config.fusion, live.episodes, stats, members=live.members)
    live.last_order = max(i.order for i in items)
    joined = {i.frame_id for i in items}
    return episodes_table([e for e in live.episodes if e.members[-1].frame_id in joined])


def _start_fusion(live: Live, cache: ConversationCache, config: SeemConfig) -> None:
    t = live.tables
    frames = t["event_frames"]
    if config.fusion.vectors == "passage":
        stored = t["retrieval_index"].filter(pl.col(Embeddings.kind) == PASSAGE)
        vectors = _vectors_of(stored, frames[EventFrames.passage_id].to_list())
    else:
        vectors = cached_embedder(cache, config.extraction.embedder).encode(frame_texts(frames, t["passages"], "summary"))
    by_id = {item.frame_id: item for item in frame_items(frames, t["passages"], vectors)}
    saved = [(r[Episodes.episode_id], r[Episodes.conversation_id], [by_id[f] for f in r[Episodes.frame_ids]])
             for r in t["episodes"].select(Episodes.episode_id, Episodes.conversation_id, Episodes.frame_ids).iter_rows(named=True)]
    live.episodes = rebuild_state(sorted(saved, key=lambda s: s[2][0].order))
    live.members = member_index(live.episodes, vectors.shape[1])
    live.last_order = max((i.order for i in by_id.values()), default=None)


def _vectors_of(rows: pl.DataFrame, item_ids: list[str]) -> np.ndarray:
    at = {item: i for i, item in enumerate(rows[Embeddings.item_id].to_list())}
    matrix = rows[Embeddings.vector].to_numpy()
    return np.ascontiguousarray(matrix[[at[i] for i in item_ids]], dtype=np.float32)


def _speakers(live: Live) -> set[str]:
    return set(live.tables["passages"][Passages.speaker].unique().to_list())


def _graph(live: Live, facts: pl.DataFrame, cache: ConversationCache, config: SeemConfig) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The entities the new facts name (new, or with a new spelling or passage), and the edges they add
    to or weigh again: fact and mention counts, and the new entities' synonym edges."""
    if live.entities is None:
        _start_graph(live, cache, config)
    touched: dict[str, None] = {}
    counts: Counter = Counter()
    for cid, subject, obj, pid in facts.select(Facts.conversation_id, Facts.subject, Facts.object, Facts.passage_id).iter_rows():
        s, o = entity_id(cid, normalise(subject)), entity_id(cid, normalise(obj))
        for eid, name in ((s, subject), (o, obj)):
            entity = live.entities.setdefault(eid, _Entity(set(), []))
            entity.aliases.add(name)
            if pid not in entity.passages:
                entity.passages.append(pid)
            touched[eid] = None
        if s != o:
            counts[(*sorted((s, o)), FACT_EDGE)] += 1
        counts[(pid, s, MENTION)] += 1
        if o != s:
            counts[(pid, o, MENTION)] += 1
    cid = live.tables["passages"][Passages.conversation_id][0]
    rows = [{Entities.entity_id: eid, Entities.conversation_id: cid, Entities.name: _name(live.entities[eid].aliases),
             Entities.aliases: sorted(live.entities[eid].aliases), Entities.passage_ids: list(live.entities[eid].passages)} for eid in touched]
    entities = table(Entities, rows)
    fresh = _embed_names(live, entities, cache, config)
    live.edge_counts.update(counts)
    edges = [(a, b, kind, float(live.edge_counts[(a, b, kind)])) for a, b, kind in counts]
    result = synonym_edges(live.entity_ids, live.entity_vectors, config.synonyms, previous=live.synonyms, known=set(live.entity_ids) - fresh)
    added = sorted(set(result.edges) - set(live.synonyms))
    live.synonyms = result.edges
    record_comparisons(cache, synonyms_name(_synonym_embedder(config).name, config), added, sorted(fresh))
    edges += [(a, b, SYNONYM, float(w)) for a, b, w in added]
    return entities, table(GraphEdges, edges, orient="row")


def _start_graph(live: Live, cache: ConversationCache, config: SeemConfig) -> None:
    t = live.tables
    entities = t["entities"]
    live.entities = {eid: _Entity(set(aliases), list(passages)) for eid, aliases, passages in
                     entities.select(Entities.entity_id, Entities.aliases, Entities.passage_ids).iter_rows()}
    live.entity_ids = entities[Entities.entity_id].to_list()
    names = entities[Entities.name].to_list()
    if config.synonyms.embedder == "extraction":  # the names' saved vectors
        live.entity_vectors = cached_embedder(cache, config.extraction.embedder).encode(names)
    else:
        live.entity_vectors = _synonym_embedder(config).encode(names)
    edges = t["graph_edges"]
    kept = edges.filter(pl.col(GraphEdges.kind) == SYNONYM)
    live.synonyms = [tuple(r) for r in kept.select(GraphEdges.source, GraphEdges.target, GraphEdges.weight).iter_rows()]
    counted = edges.filter(pl.col(GraphEdges.kind) != SYNONYM)
    live.edge_counts = Counter({(s, d, k): w for s, d, k, w in
                                counted.select(GraphEdges.source, GraphEdges.target, GraphEdges.kind, GraphEdges.weight).iter_rows()})


def _embed_names(live: Live, entities: pl.DataFrame, cache: ConversationCache, config: SeemConfig) -> set[str]:
    """The touched entities' name vectors into the kept matrix (a new entity's row, or a renamed one's
    again: a build compares the names as they read now); returns the ids of the new entities."""
    at = {eid: i for i, eid in enumerate(live.entity_ids)}
    ids, names = entities[Entities.entity_id].to_list(), entities[Entities.name].to_list()
    if config.synonyms.embedder == "extraction":
        embedder = CachedEmbedder(backends.embedder(config.extraction.embedder))
        vectors = embedder.encode(names)
        save_vectors(cache, embedder)
    else:
        vectors = _synonym_embedder(config).encode(names)
    fresh = [i for i, eid in enumerate(ids) if eid not in at]
    for i, eid in enumerate(ids):
        if eid in at:
            live.entity_vectors[at[eid]] = vectors[i]
    if fresh:
        live.entity_ids += [ids[i] for i in fresh]
        live.entity_vectors = np.concatenate([live.entity_vectors, vectors[fresh]])
    return {ids[i] for i in fresh}


def _synonym_embedder(config: SeemConfig):
    return backends.embedder(config.extraction.embedder if config.synonyms.embedder == "extraction" else config.synonyms.embedder)


def _name(aliases: set[str]) -> str:
    return sorted(aliases, key=lambda n: (-sum(c.isupper() for c in n), n))[0]
