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

from collections import Counter, defaultdict
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from seem_dagster import backends
from seem_dagster.config import SeemConfig
from seem_dagster.embeddings import CachedEmbedder
from seem_dagster.episodic.extraction.interface import PassageInput, to_tables
from seem_dagster.episodic.fusion import Episode, FusionStats, fuse, members_of
from seem_dagster.episodic.tables import episodes_table, frame_items
from seem_dagster.graph.build import FACT as FACT_EDGE
from seem_dagster.graph.build import MENTION, SYNONYM
from seem_dagster.graph.entities import entity_id, new_synonyms, normalise
from seem_dagster.pipeline.embedding import KIND as EMBEDDINGS
from seem_dagster.pipeline.embedding import cached_embedder, save_vectors
from seem_dagster.pipeline.episodes import frame_texts
from seem_dagster.pipeline.extract import cache_name
from seem_dagster.pipeline.graph import record_comparisons, synonyms_name
from seem_dagster.pipeline.index import index_rows
from seem_dagster.properties.derive import candidates, link
from seem_dagster.retrieval.index import PASSAGE
from seem_dagster.schemas import Embeddings, Entities, Episodes, EventFrames, Facts, GraphEdges, Passages, Properties, table
from seem_dagster.store.cache import ConversationCache
from seem_dagster.store.commits import Merging


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
    tables: Merging
    episodes: list | None = None  # fusion's episodes (saved ones made when first judged: _Episodes)
    members: dict | None = None
    conversation_id: str = ""
    last_order: tuple | None = None  # the latest frame fused: (timestamp, session index, turn index)
    entities: dict[str, _Entity] | None = None
    entity_ids: list[str] = field(default_factory=list)
    entity_vectors: np.ndarray | None = None
    degree: dict[str, int] = field(default_factory=dict)  # synonym edges of each entity
    edge_counts: Counter | None = None  # (source, target, kind) -> weight of fact and mention edges


@dataclass
class Increment:
    tables: dict[str, tuple[pl.DataFrame, list]]  # per table: the rows added or replaced, keys deleted (none here)
    added: dict[str, int]  # per table: the rows of it that are new (the others replace rows)
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
    added: dict[str, int] = {"passages": new.height, "event_frames": frames.height, "facts": facts.height, "retrieval_index": index.height}
    episodes = _episodes(live, frames, new, index, embedder, cache, config, added)
    save_vectors(cache, embedder)
    entities, edges = _graph(live, facts, cache, config, added)
    tables = {"passages": new, "event_frames": frames, "facts": facts, "properties": _properties(t, facts, new, added),
              "episodes": episodes, "entities": entities, "graph_edges": edges, "retrieval_index": index}
    out = {}
    for asset, frame in tables.items():
        schema = t.schema(asset)
        frame = frame.select(list(schema))
        if frame.schema != schema:
            raise RuntimeError(f"the append's {asset} rows have another schema than the memory's ({frame.schema} against {schema})")
        out[asset] = (frame, [])
    return Increment(out, added, len(inputs))


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


def _properties(t: Merging, facts: pl.DataFrame, new: pl.DataFrame, added: dict[str, int]) -> pl.DataFrame:
    """The new turns' property rows, and the earlier rows of the histories they join whose end or
    predecessor changes (each single-valued history is linked alone, so only those are linked again)."""
    heights = t.heights()
    rows = candidates(facts, new, first_ordinal=heights["facts"], first_position=heights["passages"])
    added["properties"] = len(rows)
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
              cache: ConversationCache, config: SeemConfig, added: dict[str, int]) -> pl.DataFrame:
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
    index = live.members[live.conversation_id]
    before = list(index.sizes)
    live.episodes = fuse(items, config.fusion, live.episodes, FusionStats(), members=live.members)
    added["episodes"] = len(index.sizes) - len(before)
    live.last_order = max(i.order for i in items)
    touched = [p for p, n in enumerate(index.sizes) if p >= len(before) or n != before[p]]
    return episodes_table([index.episodes[p] for p in touched])


class _Saved:
    """A saved episode, made an Episode (its member frames, joined in order) when fusion first judges it."""

    __slots__ = ("episode_id", "conversation_id", "frame_ids")

    def __init__(self, episode_id: str, conversation_id: str, frame_ids: list[str]):
        self.episode_id, self.conversation_id, self.frame_ids = episode_id, conversation_id, frame_ids


class _Episodes(list):
    """The member index's episodes: saved ones are made when first indexed (fusion judges a few
    candidates per frame), so an append's first use in a process does not make every episode."""

    def __init__(self, saved: list, frames: _Frames):
        super().__init__(saved)
        self.frames = frames

    def __getitem__(self, position):
        item = super().__getitem__(position)
        if isinstance(item, _Saved):
            episode = Episode(item.episode_id, item.conversation_id)
            for frame in self.frames.items(item.frame_ids):
                episode.add(frame)
            self[position] = item = episode
        return item


class _Frames:
    """The memory's frames as fusion reads them, made into FrameItems a few at a time."""

    def __init__(self, frames: pl.DataFrame, passages: pl.DataFrame, vectors: np.ndarray, speakers: set[str]):
        self.frames, self.passages, self.vectors, self.speakers = frames, passages, vectors, speakers
        self.row = {f: i for i, f in enumerate(frames[EventFrames.frame_id].to_list())}
        self.passage_row = {p: i for i, p in enumerate(passages[Passages.passage_id].to_list())}

    def items(self, frame_ids: list[str]):
        rows = [self.row[f] for f in frame_ids]
        frames = self.frames[rows]
        passages = self.passages[[self.passage_row[p] for p in frames[EventFrames.passage_id].to_list()]]
        return frame_items(frames, passages, self.vectors[rows], speakers=self.speakers)


def _start_fusion(live: Live, cache: ConversationCache, config: SeemConfig) -> None:
    """The fusion state of the saved episodes, made with table operations: the member index (every
    member's vector and episode, in the order fusion made the episodes: by their first frame) and
    the episodes themselves as ``_Saved`` until judged."""
    t = live.tables
    frames, passages = t["event_frames"], t["passages"]
    if config.fusion.vectors == "passage":
        stored = t["retrieval_index"].filter(pl.col(Embeddings.kind) == PASSAGE)
        vectors = _vectors_of(stored, frames[EventFrames.passage_id].to_list())
    else:
        vectors = cached_embedder(cache, config.extraction.embedder).encode(frame_texts(frames, passages, "summary"))
    order = [EventFrames.timestamp, Passages.session_index, Passages.turn_index]
    placed = (frames.select(EventFrames.frame_id, EventFrames.passage_id, EventFrames.timestamp).with_row_index("frame_row")
              .join(passages.select(Passages.passage_id, Passages.session_index, Passages.turn_index), on=Passages.passage_id,
                    how="left", maintain_order="left"))
    episodes = (t["episodes"].select(Episodes.episode_id, Episodes.conversation_id, Episodes.frame_ids)
                .with_columns(pl.col(Episodes.frame_ids).list.first().alias(EventFrames.frame_id))
                .join(placed.select(EventFrames.frame_id, *order), on=EventFrames.frame_id, how="left", maintain_order="left")
                .sort(order, maintain_order=True))
    members = (episodes.select(Episodes.frame_ids).with_row_index("position").explode(Episodes.frame_ids)
               .join(placed.select(EventFrames.frame_id, "frame_row"), left_on=Episodes.frame_ids, right_on=EventFrames.frame_id,
                     how="left", maintain_order="left"))
    saved = [_Saved(e, c, f) for e, c, f in episodes.select(Episodes.episode_id, Episodes.conversation_id, Episodes.frame_ids).iter_rows()]
    live.episodes = _Episodes(saved, _Frames(frames, passages, vectors, _speakers(live)))
    live.conversation_id = passages[Passages.conversation_id][0]
    live.members = {live.conversation_id: members_of(live.episodes, episodes[Episodes.frame_ids].list.len().to_list(),
                                                     vectors[members["frame_row"].to_numpy()], members["position"].to_numpy())}
    last = placed.sort(order).tail(1)
    live.last_order = tuple(last.select(order).row(0)) if last.height else None


def _vectors_of(rows: pl.DataFrame, item_ids: list[str]) -> np.ndarray:
    at = {item: i for i, item in enumerate(rows[Embeddings.item_id].to_list())}
    matrix = rows[Embeddings.vector].to_numpy()
    return np.ascontiguousarray(matrix[[at[i] for i in item_ids]], dtype=np.float32)


def _speakers(live: Live) -> set[str]:
    return set(live.tables["passages"][Passages.speaker].unique().to_list())


def _graph(live: Live, facts: pl.DataFrame, cache: ConversationCache, config: SeemConfig, added_rows: dict[str, int]
           ) -> tuple[pl.DataFrame, pl.DataFrame]:
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
    new_edges = sum(1 for k in counts if k not in live.edge_counts)
    live.edge_counts.update(counts)
    edges = [(a, b, kind, float(live.edge_counts[(a, b, kind)])) for a, b, kind in counts]
    first = len(live.entity_ids) - len(fresh)  # the new entities are the last ones
    synonyms, _ = new_synonyms(range(first, len(live.entity_ids)), live.entity_ids, live.entity_vectors, config.synonyms,
                               _Compared(fresh), live.degree)
    synonyms.sort()
    record_comparisons(cache, synonyms_name(_synonym_embedder(config).name, config), synonyms, sorted(fresh))
    edges += [(a, b, SYNONYM, float(w)) for a, b, w in synonyms]
    added_rows.update({"entities": len(fresh), "graph_edges": new_edges + len(synonyms)})
    return entities, table(GraphEdges, edges, orient="row")


def _start_graph(live: Live, cache: ConversationCache, config: SeemConfig) -> None:
    t = live.tables
    entities = t["entities"]
    live.entities = {eid: _Entity(set(aliases), list(passages)) for eid, aliases, passages in
                     entities.select(Entities.entity_id, Entities.aliases, Entities.passage_ids).iter_rows()}
    live.entity_ids = entities[Entities.entity_id].to_list()
    live.entity_vectors = _encode_names(entities[Entities.name].to_list(), cache, config, saved=True)
    edges = t["graph_edges"]
    kept = edges.filter(pl.col(GraphEdges.kind) == SYNONYM)
    live.degree = defaultdict(int)
    for a, b in kept.select(GraphEdges.source, GraphEdges.target).iter_rows():
        live.degree[a] += 1
        live.degree[b] += 1
    counted = edges.filter(pl.col(GraphEdges.kind) != SYNONYM)
    live.edge_counts = Counter({(s, d, k): w for s, d, k, w in
                                counted.select(GraphEdges.source, GraphEdges.target, GraphEdges.kind, GraphEdges.weight).iter_rows()})


def _embed_names(live: Live, entities: pl.DataFrame, cache: ConversationCache, config: SeemConfig) -> set[str]:
    """The touched entities' name vectors into the kept matrix (a new entity's row, or a renamed one's
    again: a build compares the names as they read now); returns the ids of the new entities."""
    at = {eid: i for i, eid in enumerate(live.entity_ids)}
    ids = entities[Entities.entity_id].to_list()
    vectors = _encode_names(entities[Entities.name].to_list(), cache, config, saved=False)
    fresh = [i for i, eid in enumerate(ids) if eid not in at]
    for i, eid in enumerate(ids):
        if eid in at:
            live.entity_vectors[at[eid]] = vectors[i]
    if fresh:
        live.entity_ids += [ids[i] for i in fresh]
        live.entity_vectors = np.concatenate([live.entity_vectors, vectors[fresh]])
    return {ids[i] for i in fresh}


class _Compared:
    """The entities compared before an append: all but its new ones."""

    def __init__(self, fresh: set[str]):
        self.fresh = fresh

    def __contains__(self, entity: str) -> bool:
        return entity not in self.fresh


def _encode_names(names: list[str], cache: ConversationCache, config: SeemConfig, saved: bool) -> np.ndarray:
    """The names' vectors for the synonym comparison, through the conversation's vector cache (the
    extraction embedder's, or the static table's, which a build encodes again each time but an
    append's first use in a process would spend seconds on); ``saved``: look up what the cache
    holds (all the memory's names), else encode (an append's few names)."""
    embedder = _synonym_embedder(config)
    cached = CachedEmbedder(embedder, cache.table(EMBEDDINGS, embedder.name) if saved else None)
    vectors = cached.encode(names)
    save_vectors(cache, cached)
    return vectors


def _synonym_embedder(config: SeemConfig):
    return backends.embedder(config.extraction.embedder if config.synonyms.embedder == "extraction" else config.synonyms.embedder)


def _name(aliases: set[str]) -> str:
    return sorted(aliases, key=lambda n: (-sum(c.isupper() for c in n), n))[0]
