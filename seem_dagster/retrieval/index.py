"""Everything a query needs for one conversation, held in memory: tables, vectors, the igraph graph."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date
from functools import cached_property

import numpy as np
import polars as pl

from seem_dagster.graph.build import MemoryGraph, to_igraph
from seem_dagster.graph.entities import is_proper_name
from seem_dagster.properties.vocabulary import name_property
from seem_dagster.retrieval.lexical import Bm25
from seem_dagster.schemas import Embeddings, Entities, Episodes, Facts, Passages, Properties

PASSAGE, FACT, SENTENCE = "passage", "fact", "sentence"
# A sentence ends at ".", "!" or "?" followed by white space.
SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+")


def fact_text(subject: str, relation: str, obj: str) -> str:
    return f"{subject} {relation} {obj}"


def passage_text(speaker: str, text: str) -> str:
    return f"{speaker}: {text}"


def iso_span(time: str | None) -> tuple[int, int] | None:
    """A fact's resolved time ("2023-05-04" or "2023-05-01/2023-05-31") as (first, last) day ordinals."""
    if not time:
        return None
    try:
        first, _, last = time.partition("/")
        return date.fromisoformat(first).toordinal(), date.fromisoformat(last or first).toordinal()
    except ValueError:
        return None


def pooled_fact_spans(passages: pl.DataFrame, facts: pl.DataFrame) -> dict[str, list[tuple[str, tuple[tuple[int, int], ...]]]]:
    """passage id -> [(fact id, character ranges in passage_text)] of the facts whose vectors are pooled
    from their passage's forward pass instead of embedded alone: those the extractor gave a span. The
    ranges are the speaker's name (the subject of the first person's facts) and the fact's own span.
    Two kinds are still embedded alone, matched by their own words, which find them better than their
    pooled vectors do: a dated fact (temporal questions find their turn through it) and a fact that
    states a single-valued property (where someone lives, a job, a count: the evidence of a knowledge
    update, and what the property route scores)."""
    speakers = dict(zip(passages[Passages.passage_id].to_list(), passages[Passages.speaker].to_list()))
    out: dict[str, list[tuple[str, tuple[tuple[int, int], ...]]]] = {}
    rows = facts.select(Facts.fact_id, Facts.passage_id, Facts.span_start, Facts.span_end, Facts.time, Facts.relation, Facts.object).iter_rows()
    for fact_id, pid, start, end, time, relation, obj in rows:
        if start is None or end is None or time is not None or pid not in speakers:
            continue
        named = name_property(relation, obj)
        if named is not None and named.single_valued:
            continue
        shift = len(speakers[pid]) + 2  # past "speaker: "
        out.setdefault(pid, []).append((fact_id, ((0, len(speakers[pid])), (start + shift, end + shift))))
    return out


def sentence_spans(speaker: str, text: str) -> list[tuple[tuple[int, int], ...]]:
    """The sentences of a passage as character ranges of passage_text(speaker, text), each with the
    speaker's name (as a fact's span has it); none for a passage of one sentence, whose vector is the
    passage's own. A remark made in passing ("Can you recommend some plants? By the way, my tank has 10
    neon tetras") is diluted in the whole turn's vector and whole in its sentence's."""
    shift = len(speaker) + 2  # past "speaker: "
    pieces, start = [], 0
    for cut in SENTENCE_BREAK.finditer(text):
        if text[start:cut.start()].strip():
            pieces.append((start, cut.start()))
        start = cut.end()
    if text[start:].strip():
        pieces.append((start, len(text)))
    if len(pieces) < 2:
        return []
    return [((0, len(speaker)), (a + shift, b + shift)) for a, b in pieces]


def sentence_id(passage_id: str, n: int) -> str:
    """The retrieval index's item id of a passage's ``n``-th sentence."""
    return f"{passage_id}#{n}"


def sentence_passage(item_id: str) -> str:
    """The passage id of a sentence's item id (sentence_id's inverse)."""
    return item_id.rpartition("#")[0]


def passage_spans(passages: pl.DataFrame, facts: pl.DataFrame, pooled_facts: bool = True
                  ) -> dict[str, list[tuple[str, str, tuple[tuple[int, int], ...]]]]:
    """passage id -> [(kind, item id, character ranges)] of everything pooled from the passage's
    forward pass: its sentences and, with ``pooled_facts``, its facts (pooled_fact_spans). Every step
    that embeds a passage asks for all of them, so no passage runs through the model twice."""
    out: dict[str, list[tuple[str, str, tuple[tuple[int, int], ...]]]] = {}
    if pooled_facts:
        for pid, spans in pooled_fact_spans(passages, facts).items():
            out[pid] = [(FACT, f, r) for f, r in spans]
    for pid, speaker, text in passages.select(Passages.passage_id, Passages.speaker, Passages.text).iter_rows():
        sentences = sentence_spans(speaker, text)
        if sentences:
            out.setdefault(pid, []).extend((SENTENCE, sentence_id(pid, n), r) for n, r in enumerate(sentences))
    return out


@dataclass
class MemoryIndex:
    passages: pl.DataFrame
    facts: pl.DataFrame
    entities: pl.DataFrame
    episodes: pl.DataFrame
    graph: MemoryGraph
    passage_vectors: np.ndarray  # aligned with graph.passage_ids (= passages rows)
    fact_vectors: np.ndarray  # aligned with facts rows
    sentence_vectors: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.float32))  # passages of two sentences or more
    sentence_rows: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # each sentence's passage row
    entity_passages: dict[str, int] = field(default_factory=dict)
    episode_of: dict[str, int] = field(default_factory=dict)
    position: dict[str, int] = field(default_factory=dict)
    properties: pl.DataFrame | None = None  # the property memory, when the reader loaded it (retrieval/load.py)
    _name_links: dict[int, dict[str, dict[str, str]]] = field(default_factory=dict, repr=False)
    _lexical: dict[bool, Bm25] = field(default_factory=dict, repr=False)

    def lexical(self, stems: bool = True) -> Bm25:
        """BM25 over the passages' "speaker: text", words matched by their stems or exactly (Bm25); each
        built on first use (milliseconds per conversation) and kept."""
        if stems not in self._lexical:
            texts = [passage_text(s, t) for s, t in zip(self.passages[Passages.speaker].to_list(), self.passages[Passages.text].to_list())]
            self._lexical[stems] = Bm25(texts, stems)
        return self._lexical[stems]

    @cached_property
    def speakers(self) -> tuple[str, ...]:
        """The conversation's speakers: every passage is embedded after one of these names."""
        return tuple(sorted(set(self.passages[Passages.speaker].to_list())))

    @cached_property
    def speaker_of_row(self) -> list[str]:
        """Each passage row's speaker."""
        return self.passages[Passages.speaker].to_list()

    @cached_property
    def word_counts(self) -> np.ndarray:
        """Each passage row's words (whitespace-separated), which the reranker reads."""
        return np.fromiter((len(t.split()) for t in self.passages[Passages.text].to_list()), dtype=np.int64, count=self.passages.height)

    @cached_property
    def rows(self) -> dict[str, dict]:
        """passage id -> its row (the context renders turns from these)."""
        return {r[Passages.passage_id]: r for r in self.passages.iter_rows(named=True)}

    @cached_property
    def fact_rows(self) -> np.ndarray:
        """Fact row -> the row of the passage it came from."""
        return np.fromiter((self.position[p] for p in self.facts[Facts.passage_id].to_list()), dtype=np.int64, count=self.facts.height)

    @cached_property
    def time_spans(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(passage row, first day, last day), days as ordinals, of every time a passage is about: its
        session's date, and the resolved time of each of its facts (an event "last week" told today
        is about last week)."""
        rows = list(range(self.passages.height))
        days = [t.date().toordinal() for t in self.passages[Passages.timestamp].to_list()]
        first, last = list(days), list(days)
        for row, time in zip(self.fact_rows.tolist(), self.facts[Facts.time].to_list()):
            span = iso_span(time)
            if span is not None:
                rows.append(row)
                first.append(span[0])
                last.append(span[1])
        return np.array(rows, dtype=np.int64), np.array(first, dtype=np.int64), np.array(last, dtype=np.int64)

    @cached_property
    def fact_spans(self) -> tuple[np.ndarray, np.ndarray]:
        """(first day, last day) of each fact's resolved time as ordinals; -1 where it has none."""
        spans = [iso_span(t) or (-1, -1) for t in self.facts[Facts.time].to_list()]
        return (np.array([a for a, _ in spans], dtype=np.int64).reshape(-1), np.array([b for _, b in spans], dtype=np.int64).reshape(-1))

    @cached_property
    def recency(self) -> np.ndarray:
        """Each passage row's place in time, 0 for the earliest turn to 1 for the latest (ties share a place)."""
        stamps = self.passages[Passages.timestamp].to_numpy().astype("datetime64[s]").astype(np.int64)
        if stamps.size < 2:
            return np.ones(stamps.size)
        order = np.unique(stamps, return_inverse=True)[1]
        return order / max(1, order.max())

    @cached_property
    def superseded_by(self) -> dict[str, str]:
        """passage id -> the passage that stated the value which replaced the single-valued property it
        states (the last of a chain: Leeds -> York -> Hull gives Hull for both)."""
        props = self.properties
        if props is None or props.height == 0:
            return {}
        single = props.filter(pl.col(Properties.single_valued))
        said = dict(zip(single[Properties.property_id].to_list(), single[Properties.passage_id].to_list()))
        nxt = {old: pid for old, pid in zip(single[Properties.supersedes].to_list(), single[Properties.passage_id].to_list()) if old}
        by_passage = {}
        for prop_id, pid in said.items():
            later, seen = nxt.get(prop_id), set()
            while later is not None and later not in seen:
                seen.add(later)
                row = single.filter(pl.col(Properties.passage_id) == later)
                by_passage[pid] = later
                following = [nxt.get(p) for p in row[Properties.property_id].to_list() if nxt.get(p)]
                later = following[0] if following else None
        return {p: q for p, q in by_passage.items() if p != q}

    @cached_property
    def properties_of(self) -> dict[str, frozenset[str]]:
        """passage id -> the names of the properties it states (lives_in, start_use, ...)."""
        props = self.properties
        if props is None or props.height == 0:
            return {}
        out: dict[str, set[str]] = {}
        for pid, name in props.select(Properties.passage_id, Properties.property).iter_rows():
            out.setdefault(pid, set()).add(name)
        return {p: frozenset(names) for p, names in out.items()}

    @cached_property
    def superseded(self) -> np.ndarray:
        """Per passage row, whether a single-valued property it states was superseded later (the value
        it said no longer holds)."""
        out = np.zeros(self.passages.height, dtype=bool)
        for pid in self.superseded_by:
            if pid in self.position:
                out[self.position[pid]] = True
        return out

    @cached_property
    def source_refs(self) -> dict[str, str]:
        return dict(zip(self.passages[Passages.passage_id].to_list(), self.passages[Passages.source_ref].to_list()))

    @cached_property
    def session_members(self) -> dict[str, list[str]]:
        """passage id -> every passage of its session, in order (the unfused neighbourhood)."""
        sessions: dict[int, list[str]] = {}
        for pid, s in zip(self.passages[Passages.passage_id].to_list(), self.passages[Passages.session_index].to_list()):
            sessions.setdefault(s, []).append(pid)
        return {pid: members for members in sessions.values() for pid in members}

    @cached_property
    def turn_index(self) -> dict[str, int]:
        """passage id -> its turn's index in the original session (gaps where turns were left out)."""
        return dict(zip(self.passages[Passages.passage_id].to_list(), self.passages[Passages.turn_index].to_list()))

    @cached_property
    def answers_to(self) -> np.ndarray:
        """Row -> the row of the question it answers (the turn just before it in the original
        session, by another speaker, asking something), or -1."""
        out = np.full(self.passages.height, -1, dtype=np.int64)
        rows = zip(self.passages[Passages.session_index].to_list(), self.passages[Passages.turn_index].to_list(),
                   self.passages[Passages.speaker].to_list(), self.passages[Passages.text].to_list())
        previous = None
        for i, (session, turn, speaker, text) in enumerate(rows):
            if previous and previous[0] == session and previous[1] == turn - 1 and previous[2] != speaker and "?" in previous[3]:
                out[i] = i - 1
            previous = (session, turn, speaker, text)
        return out

    def name_links(self, max_turns: int) -> dict[str, dict[str, str]]:
        """passage id -> {other passage id: name} for proper names (not the speakers') that at most
        ``max_turns`` turns of the memory name: a name that rare ties its turns to one storyline."""
        if max_turns not in self._name_links:
            texts = dict(zip(self.passages[Passages.passage_id].to_list(), self.passages[Passages.text].to_list()))
            speakers = set(self.passages[Passages.speaker].to_list())
            links: dict[str, dict[str, str]] = {}
            rows = zip(self.entities[Entities.name].to_list(), self.entities[Entities.aliases].to_list(),
                       self.entities[Entities.passage_ids].to_list())
            for name, aliases, pids in rows:
                pids = [p for p in dict.fromkeys(pids) if p in texts]
                if not 2 <= len(pids) <= max_turns or name in speakers:
                    continue
                if any(is_proper_name(a, [texts[p] for p in pids]) for a in aliases):
                    for p in pids:
                        links.setdefault(p, {}).update({q: name for q in pids if q != p})
            self._name_links[max_turns] = links
        return self._name_links[max_turns]

    @classmethod
    def from_tables(
        cls,
        passages: pl.DataFrame,
        facts: pl.DataFrame,
        entities: pl.DataFrame,
        episodes: pl.DataFrame,
        edges: pl.DataFrame,
        vectors: pl.DataFrame,
    ) -> MemoryIndex:
        passages = passages.sort(Passages.session_index, Passages.turn_index)
        graph = to_igraph(passages, entities[Entities.entity_id].to_list(), edges)
        dim = vectors[Embeddings.vector].dtype.size if vectors.height else 384
        kinds = {kind: vectors.filter(pl.col(Embeddings.kind) == kind).select(Embeddings.item_id, Embeddings.vector)
                 for kind in (PASSAGE, FACT, SENTENCE)}

        def stack(kind, item_ids):
            if not item_ids:
                return np.zeros((0, dim), np.float32)
            rows = pl.DataFrame({Embeddings.item_id: item_ids}).join(kinds[kind], on=Embeddings.item_id, how="left", maintain_order="left")
            if rows[Embeddings.vector].null_count():
                missing = rows.filter(pl.col(Embeddings.vector).is_null())[Embeddings.item_id][0]
                raise KeyError(f"the retrieval index has no {kind} vector for {missing}")
            return rows[Embeddings.vector].to_numpy().astype(np.float32)

        position = {p: i for i, p in enumerate(passages[Passages.passage_id].to_list())}
        rows_of = pl.DataFrame({"pid": list(position), "row": list(position.values())}, schema={"pid": pl.String(), "row": pl.Int64()})
        placed = (kinds[SENTENCE].select(Embeddings.item_id)
                  .with_columns(pl.col(Embeddings.item_id).str.replace(r"#[^#]*$", "").alias("pid"))
                  .join(rows_of, on="pid", how="inner").sort("row", Embeddings.item_id))
        sentences = list(zip(placed["row"].to_list(), placed[Embeddings.item_id].to_list()))

        return cls(
            passages=passages,
            facts=facts,
            entities=entities,
            episodes=episodes,
            graph=graph,
            passage_vectors=stack(PASSAGE, passages[Passages.passage_id].to_list()),
            fact_vectors=stack(FACT, facts[Facts.fact_id].to_list()),
            sentence_vectors=stack(SENTENCE, [i for _, i in sentences]),
            sentence_rows=np.fromiter((r for r, _ in sentences), dtype=np.int64, count=len(sentences)),
            entity_passages={e: len(p) for e, p in zip(entities[Entities.entity_id].to_list(), entities[Entities.passage_ids].to_list())},
            episode_of={p: i for i, ps in enumerate(episodes[Episodes.passage_ids].to_list()) for p in ps},
            position=position,
        )
