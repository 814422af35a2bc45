"""One extraction interface for every backend (embedded NLP, vLLM, HTTP).

A backend takes a batch of passages, each with its speaker, session date and the preceding turn as
context, and returns per passage a frame (summary + events) and its facts. Everything here is pure:
building the inputs from a passages table, turning results into the frames and facts tables, and
the cache keys that let a rebuild skip what was already extracted.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Protocol

import polars as pl

from seem_dagster import ids
from seem_dagster.properties.stated import StatedProperty
from seem_dagster.schemas import EVENT_ROLES, EventFrames, Facts, Passages, table


@dataclass(frozen=True)
class PassageInput:
    passage_id: str
    conversation_id: str
    speaker: str
    text: str
    timestamp: datetime
    previous_speaker: str | None = None
    previous_text: str | None = None
    # Every speaker of the conversation: lets a backend resolve "you" to the other person.
    speakers: tuple[str, ...] = ()

    def cache_key(self, extractor: str, version: str) -> str:
        return ids.stable_hash(
            "extract", extractor, version, self.speaker, self.text, self.timestamp.isoformat(),
            self.previous_speaker, self.previous_text, ",".join(self.speakers), length=32,
        )


@dataclass
class Event:
    participants: list[str] = field(default_factory=list)
    action: str | None = None
    time: str | None = None
    time_text: str | None = None
    location: str | None = None
    cause: str | None = None
    manner: str | None = None


@dataclass
class Fact:
    subject: str
    relation: str
    object: str
    time: str | None = None
    time_text: str | None = None
    # Where the fact is said in its passage's text (characters, end exclusive): from its verb to the
    # end of its object. None when the backend does not know (a language model's facts).
    span_start: int | None = None
    span_end: int | None = None


@dataclass
class PassageExtraction:
    passage_id: str
    summary: str
    events: list[Event] = field(default_factory=list)
    facts: list[Fact] = field(default_factory=list)
    # None: derive this passage's properties from its facts; a list (even empty): the model stated them.
    properties: list[StatedProperty] | None = None

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, raw: str) -> PassageExtraction:
        data = json.loads(raw)
        return cls(
            passage_id=data["passage_id"],
            summary=data["summary"],
            events=[Event(**e) for e in data["events"]],
            facts=[Fact(**f) for f in data["facts"]],
            properties=[StatedProperty(**p) for p in data["properties"]] if data.get("properties") is not None else None,
        )


class Extractor(Protocol):
    name: str
    version: str

    def extract(self, batch: Sequence[PassageInput]) -> list[PassageExtraction]:
        """One result per input, in the same order."""


def inputs_from_passages(passages: pl.DataFrame) -> list[PassageInput]:
    ordered = passages.sort(Passages.session_index, Passages.turn_index)
    speakers = tuple(sorted(ordered[Passages.speaker].unique().to_list()))
    result = []
    previous: dict | None = None
    for row in ordered.iter_rows(named=True):
        same_session = previous is not None and previous[Passages.session_id] == row[Passages.session_id]
        result.append(
            PassageInput(
                passage_id=row[Passages.passage_id],
                conversation_id=row[Passages.conversation_id],
                speaker=row[Passages.speaker],
                text=row[Passages.text],
                timestamp=row[Passages.timestamp],
                previous_speaker=previous[Passages.speaker] if same_session else None,
                previous_text=previous[Passages.text] if same_session else None,
                speakers=speakers,
            )
        )
        previous = row
    return result


def frame_id(extractor: str, passage_id: str) -> str:
    return "f_" + ids.stable_hash("frame", extractor, passage_id)


def fact_id(passage_id: str, index: int, fact: Fact) -> str:
    return "t_" + ids.stable_hash("fact", passage_id, index, fact.subject, fact.relation, fact.object, fact.time)


def to_tables(
    inputs: Sequence[PassageInput], results: Sequence[PassageExtraction], extractor: str
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Frames and facts tables from results (one per input, same order)."""
    frames, facts = [], []
    for inp, res in zip(inputs, results, strict=True):
        if res.passage_id != inp.passage_id:
            raise ValueError(f"extractor {extractor} returned passage {res.passage_id} for {inp.passage_id}")
        frames.append(
            {
                EventFrames.frame_id: frame_id(extractor, inp.passage_id),
                EventFrames.passage_id: inp.passage_id,
                EventFrames.conversation_id: inp.conversation_id,
                EventFrames.timestamp: inp.timestamp,
                EventFrames.summary: res.summary,
                EventFrames.events: [{role: getattr(e, role) for role in EVENT_ROLES} for e in res.events],
                EventFrames.extractor: extractor,
            }
        )
        for index, fact in enumerate(res.facts):
            facts.append(
                {
                    Facts.fact_id: fact_id(inp.passage_id, index, fact),
                    Facts.conversation_id: inp.conversation_id,
                    Facts.subject: fact.subject,
                    Facts.relation: fact.relation,
                    Facts.object: fact.object,
                    Facts.time: fact.time,
                    Facts.time_text: fact.time_text,
                    Facts.span_start: fact.span_start,
                    Facts.span_end: fact.span_end,
                    Facts.passage_id: inp.passage_id,
                    Facts.extractor: extractor,
                }
            )
    return table(EventFrames, frames), table(Facts, facts)


@dataclass
class CachedRun:
    results: list[PassageExtraction]
    hits: int
    misses: int
    new_entries: dict[str, str]


def extract_with_cache(extractor: Extractor, inputs: Sequence[PassageInput], cache: dict[str, str]) -> CachedRun:
    """Extract only inputs whose key is not in ``cache`` (key -> result JSON); a rebuild extracts nothing."""
    keys = [inp.cache_key(extractor.name, extractor.version) for inp in inputs]
    missing = [i for i, k in enumerate(keys) if k not in cache]
    fresh = extractor.extract([inputs[i] for i in missing]) if missing else []
    if len(fresh) != len(missing):
        raise ValueError(f"extractor {extractor.name} returned {len(fresh)} results for {len(missing)} passages")
    new_entries = {keys[i]: res.to_json() for i, res in zip(missing, fresh)}
    by_index = dict(zip(missing, fresh))
    results = [
        by_index[i] if i in by_index else _rebind(PassageExtraction.from_json(cache[k]), inputs[i].passage_id)
        for i, k in enumerate(keys)
    ]
    return CachedRun(results, hits=len(inputs) - len(missing), misses=len(missing), new_entries=new_entries)


def _rebind(result: PassageExtraction, passage_id: str) -> PassageExtraction:
    # Same text, speaker, date and context elsewhere gives the same extraction; keep this passage's id.
    result.passage_id = passage_id
    return result
