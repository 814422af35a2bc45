"""What `Memory` takes and returns: plain records, each with ``to_json()`` for the CLI and the tools."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from seem_dagster.retrieval.context import Context
from seem_dagster.retrieval.reasons import Reason


@dataclass(frozen=True)
class Turn:
    """One turn to ``Memory.add``. ``timestamp`` defaults to the time of the call (UTC); ``id`` is the
    turn's own id in your application (unique in the conversation), kept as its ``source_ref``."""

    speaker: str
    text: str
    timestamp: datetime | str | None = None
    id: str | None = None


@dataclass(frozen=True)
class Hit:
    """One ranked turn: where it comes from, what was said, and why it is there."""

    rank: int
    passage_id: str
    source_ref: str  # the id the input gave the turn (a JSONL line's id, LoCoMo's D1:3)
    speaker: str
    text: str
    timestamp: datetime
    score: float
    reason: Reason

    def to_json(self) -> dict:
        return {"rank": self.rank, "passage_id": self.passage_id, "source_ref": self.source_ref, "speaker": self.speaker,
                "text": self.text, "timestamp": self.timestamp.isoformat(), "score": round(self.score, 6),
                "reason": str(self.reason), "why": self.reason.to_json()}


@dataclass(frozen=True)
class SeedFact:
    subject: str
    relation: str
    object: str
    time: str | None
    passage_id: str
    score: float


@dataclass(frozen=True)
class Recall:
    """A question against one conversation's memory: the ranked turns, the seed facts of the walk, the
    context an answering model reads, and (with a model configured and asked for) its answer."""

    conversation_id: str
    question: str
    date: datetime  # the question's date: relative dates in it resolve against this
    as_of: datetime | None  # the memory as it stood then (later turns left out)
    mode: str  # "graph" (the walk ran) or "dense"
    hits: list[Hit]
    seed_facts: list[SeedFact]
    context: Context | None  # None when only the ranking was asked for (``Memory.search``)
    seconds: float
    build_id: str  # the published build the answer was read from (the base, when appends were published on it)
    answer: dict | None = None  # {"answer", "evidence"} from the answering model
    llm_calls: list[dict] | None = None
    commit: str | None = None  # the last append commit on that build the answer read (None: none)

    def to_json(self) -> dict:
        return {"question": self.question, "conversation_id": self.conversation_id, "date": self.date.isoformat(),
                "as_of": self.as_of.isoformat() if self.as_of else None, "mode": self.mode, "build_id": self.build_id, "commit": self.commit,
                "passages": [h.to_json() for h in self.hits], "seed_facts": [s.__dict__ for s in self.seed_facts],
                "context": self.context.text if self.context else None, "context_tokens": self.context.tokens if self.context else None,
                "answer": (self.answer or {}).get("answer"), "answer_evidence": (self.answer or {}).get("evidence"),
                "llm_calls": self.llm_calls}


@dataclass(frozen=True)
class Added:
    """What one ``add`` or one conversation of ``add_file`` built."""

    conversation_id: str
    status: str  # new | changed | unchanged | current (unchanged and its memory up to date: not rebuilt) | empty | forgotten
    turns_added: int  # turns in the memory now that were not before
    passages: int  # turns in the memory now
    build_id: str | None  # the Dagster run that built and published it; None when nothing was built
    seconds: float
    extracted: int = 0  # turns the build extracted (the rest came from the extraction cache)
    forgotten: int = 0  # turns left out because they were forgotten (add: of the turns given; add_file: of the input)
    excluded: int = 0  # turns by speakers outside ingest.only_speakers
    skipped: tuple[str, ...] = ()  # empty turns skipped (ingest.allow_empty_turns), each with where it was
    step_seconds: dict[str, float] = field(default_factory=dict)
    commit: str | None = None  # the append commit that published the turns, in process (build_id is then None)
    # how the append made its rows: "by step" (only the new turns' work), or "whole conversation: <why>"
    appended: str | None = None

    def to_json(self) -> dict:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}


@dataclass(frozen=True)
class Forgotten:
    """What one ``forget`` removed."""

    conversation_id: str
    turns: int  # turns forgotten by this request
    source_refs: tuple[str, ...]  # their input ids
    passages: int  # turns left in the memory (0: the conversation is gone)
    build_id: str | None  # the build published without them (None: the whole conversation went)
    seconds: float
    removed: dict[str, int] = field(default_factory=dict)  # what the sweep removed, by where (builds, cache rows, logs, runs)
    warnings: tuple[str, ...] = ()  # what could not be cleaned, and what would clean it
    already_forgotten: tuple[str, ...] = ()  # turns the request named that an earlier forget had removed

    def to_json(self) -> dict:
        return {**{k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}}
