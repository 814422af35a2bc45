"""What a reader produces: one conversation's passages and questions, validated, nothing written yet."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

import polars as pl

from seem_dagster import ids
from seem_dagster.schemas import Passages, Questions, table


@dataclass
class Conversation:
    conversation_id: str
    source_file: str
    source_format: str
    passages: pl.DataFrame
    questions: pl.DataFrame
    skipped: list[str] = field(default_factory=list)
    excluded: int = 0  # turns left out by IngestConfig.only_speakers

    def keep_speakers(self, speakers: tuple[str, ...]) -> None:
        kept = self.passages.filter(pl.col(Passages.speaker).is_in(list(speakers)))
        self.excluded = self.passages.height - kept.height
        self.passages = kept

    @property
    def fingerprint(self) -> str:
        """Changes whenever any turn or question changes: the sensor compares it to decide on reruns.
        Kept for the tables it was computed from (copies of one parse share them: an add registers
        and builds the same turns), and extended, not computed again, for a parse that extends one
        (``extend_fingerprint``)."""
        for passages, questions, value in _FINGERPRINTS:
            if passages is self.passages and questions is self.questions:
                return value
        value = ids.multiset_fingerprint([*_passage_keys(self.passages), *_question_keys(self.questions)])
        _remember(self, value)
        return value

    def extend_fingerprint(self, earlier: Conversation, added: pl.DataFrame) -> None:
        """This conversation is ``earlier`` with the passages ``added`` (its questions the same): its
        fingerprint is ``earlier``'s plus theirs."""
        _remember(self, ids.multiset_fingerprint(_passage_keys(added), start=earlier.fingerprint))


def _passage_keys(passages: pl.DataFrame) -> list[str]:
    return ["p" + repr(r) for r in passages.select(Passages.passage_id, Passages.timestamp, Passages.source_ref).rows()]


def _question_keys(questions: pl.DataFrame) -> list[str]:
    return ["q" + repr(r) for r in questions.select(Questions.question_id, Questions.question).rows()]


def _remember(conversation: Conversation, value: str) -> None:
    _FINGERPRINTS.insert(0, (conversation.passages, conversation.questions, value))
    del _FINGERPRINTS[4:]


# (passages, questions, fingerprint) of the last conversations fingerprinted; emptied with the parsed
# files (``ingest.load.clear_parsed``), so no table of a forgotten turn stays.
_FINGERPRINTS: list[tuple[pl.DataFrame, pl.DataFrame, str]] = []


def clear_fingerprints() -> None:
    _FINGERPRINTS.clear()


class ConversationBuilder:
    """Collects turns and questions of one conversation, assigning stable passage ids."""

    def __init__(self, conversation_id: str, source_file: str, source_format: str):
        self.conversation_id = conversation_id
        self.source_file = source_file
        self.source_format = source_format
        self.rows: list[dict] = []
        self.questions: list[dict] = []
        self.skipped: list[str] = []

    def add_turn(
        self,
        *,
        session_id: str,
        session_index: int,
        turn_index: int,
        speaker: str,
        text: str,
        timestamp: datetime,
        source_ref: str,
    ) -> None:
        self.rows.append(
            {
                Passages.passage_id: ids.passage_id(self.conversation_id, session_id, turn_index, speaker, text),
                Passages.conversation_id: self.conversation_id,
                Passages.session_id: session_id,
                Passages.session_index: session_index,
                Passages.turn_index: turn_index,
                Passages.speaker: speaker,
                Passages.text: text,
                Passages.timestamp: timestamp,
                Passages.source_ref: source_ref,
            }
        )

    def add_question(
        self,
        *,
        question_id: str,
        question: str,
        question_date: datetime | None,
        answer: str | None,
        category: str | None,
        evidence: list[str],
        evidence_sessions: list[str],
    ) -> None:
        self.questions.append(
            {
                Questions.question_id: question_id,
                Questions.conversation_id: self.conversation_id,
                Questions.question: question,
                Questions.question_date: question_date,
                Questions.answer: answer,
                Questions.category: category,
                Questions.evidence: evidence,
                Questions.evidence_sessions: evidence_sessions,
            }
        )

    def require_turns(self, at, field: str) -> None:
        """A conversation with no turn is bad input (it would be a memory of nothing); one whose every
        turn was empty and skipped (ingest.allow_empty_turns) is kept, empty, for load_input to report."""
        if not self.rows and not self.skipped:
            raise at.fail(field, "no turns: a conversation needs at least one")

    def build(self) -> Conversation:
        passages = table(Passages, self.rows).sort(Passages.session_index, Passages.turn_index)
        return Conversation(
            conversation_id=self.conversation_id,
            source_file=self.source_file,
            source_format=self.source_format,
            passages=passages,
            questions=table(Questions, self.questions),
            skipped=list(self.skipped),
        )
