"""Every table's schema and column names. Other modules name columns through these classes only.

Accessing a field on a pandera ``DataFrameModel`` class gives the column name, so
``Passages.text == "text"``: code writes ``pl.col(Passages.text)`` and a rename happens here alone.
"""

from __future__ import annotations

import polars as pl
import pandera.polars as pa


class Passages(pa.DataFrameModel):
    """One row per conversation turn: the unit of history everything else points back to."""

    passage_id: str = pa.Field(unique=True, str_matches=r"^p_[0-9a-f]{16}$")
    conversation_id: str = pa.Field(str_length={"min_value": 1})
    session_id: str = pa.Field(str_length={"min_value": 1})
    session_index: int = pa.Field(ge=0)
    turn_index: int = pa.Field(ge=0)
    speaker: str = pa.Field(str_length={"min_value": 1})
    text: str = pa.Field(str_length={"min_value": 1})
    timestamp: pl.Datetime("us") = pa.Field()
    source_ref: str = pa.Field(str_length={"min_value": 1})

    class Config:
        strict = True
        coerce = False

    @pa.dataframe_check(error="(session_index, turn_index) must be unique within a conversation")
    @classmethod
    def unique_position(cls, data) -> pl.LazyFrame:
        frame = data.lazyframe
        dup = pl.struct(cls.conversation_id, cls.session_index, cls.turn_index).is_duplicated()
        return frame.select(~dup)

    @pa.dataframe_check(error="source_ref must be unique within a conversation")
    @classmethod
    def unique_source_ref(cls, data) -> pl.LazyFrame:
        return data.lazyframe.select(~pl.struct(cls.conversation_id, cls.source_ref).is_duplicated())


class Questions(pa.DataFrameModel):
    """Questions that come with an input (benchmarks, the bundled sample), kept for query and evaluation."""

    question_id: str = pa.Field(unique=True)
    conversation_id: str = pa.Field(str_length={"min_value": 1})
    question: str = pa.Field(str_length={"min_value": 1})
    question_date: pl.Datetime("us") = pa.Field(nullable=True)
    answer: str = pa.Field(nullable=True)
    category: str = pa.Field(nullable=True)
    # Gold turns as source_refs, and (LongMemEval) gold session ids: evaluation reads them, retrieval never.
    evidence: pl.List(pl.String) = pa.Field()
    evidence_sessions: pl.List(pl.String) = pa.Field()

    class Config:
        strict = True
        coerce = False


PASSAGES_DTYPES: dict[str, pl.DataType] = {
    Passages.passage_id: pl.String(),
    Passages.conversation_id: pl.String(),
    Passages.session_id: pl.String(),
    Passages.session_index: pl.Int64(),
    Passages.turn_index: pl.Int64(),
    Passages.speaker: pl.String(),
    Passages.text: pl.String(),
    Passages.timestamp: pl.Datetime("us"),
    Passages.source_ref: pl.String(),
}

QUESTIONS_DTYPES: dict[str, pl.DataType] = {
    Questions.question_id: pl.String(),
    Questions.conversation_id: pl.String(),
    Questions.question: pl.String(),
    Questions.question_date: pl.Datetime("us"),
    Questions.answer: pl.String(),
    Questions.category: pl.String(),
    Questions.evidence: pl.List(pl.String()),
    Questions.evidence_sessions: pl.List(pl.String()),
}


def passages_frame(rows: list[dict]) -> pl.DataFrame:
    """Build a passages table with the exact column order and dtypes of the schema."""
    return pl.DataFrame(rows, schema=PASSAGES_DTYPES)


def questions_frame(rows: list[dict]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=QUESTIONS_DTYPES)
