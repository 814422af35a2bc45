"""Every table's schema and column names. Other modules name columns through these classes only.

Accessing a field on a pandera ``DataFrameModel`` class gives the column name, so
``Passages.text == "text"``: code writes ``pl.col(Passages.text)`` and a rename happens here alone.
"""

from __future__ import annotations

import pandera.polars as pa
import polars as pl


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


# The six semantic roles of one event. `time` is an ISO date or interval resolved against the
# session date; `time_text` keeps the words it came from.
EVENT = pl.Struct(
    {
        "participants": pl.List(pl.String()),
        "action": pl.String(),
        "time": pl.String(),
        "time_text": pl.String(),
        "location": pl.String(),
        "cause": pl.String(),
        "manner": pl.String(),
    }
)
EVENT_ROLES = tuple(f.name for f in EVENT.fields)

ISO_TIME = r"^\d{4}-\d{2}-\d{2}(/\d{4}-\d{2}-\d{2})?$"


class EventFrames(pa.DataFrameModel):
    """One frame per passage: a one-sentence summary and its events, pointing back to the passage."""

    frame_id: str = pa.Field(unique=True, str_matches=r"^f_[0-9a-f]{16}$")
    passage_id: str = pa.Field(unique=True)
    conversation_id: str = pa.Field()
    timestamp: pl.Datetime("us") = pa.Field()
    summary: str = pa.Field(str_length={"min_value": 1})
    events: pl.List(EVENT) = pa.Field()
    extractor: str = pa.Field()

    class Config:
        strict = True


class Facts(pa.DataFrameModel):
    """Time-stamped quadruples (subject, relation, object, time), each from one passage."""

    fact_id: str = pa.Field(unique=True, str_matches=r"^t_[0-9a-f]{16}$")
    conversation_id: str = pa.Field()
    subject: str = pa.Field(str_length={"min_value": 1})
    relation: str = pa.Field(str_length={"min_value": 1})
    object: str = pa.Field(str_length={"min_value": 1})
    time: str = pa.Field(nullable=True, str_matches=ISO_TIME)
    time_text: str = pa.Field(nullable=True)
    # The characters of the passage's text that state the fact (end exclusive), when the extractor
    # knows them: the retrieval index pools the fact's vector from the passage's own tokens there.
    span_start: int = pa.Field(nullable=True, ge=0)
    span_end: int = pa.Field(nullable=True, ge=1)
    passage_id: str = pa.Field()
    extractor: str = pa.Field()

    class Config:
        strict = True

    @pa.dataframe_check(error="a fact's span must have both ends or neither, and end after it starts (span_start < span_end)")
    @classmethod
    def ordered_span(cls, data) -> pl.LazyFrame:
        start, end = pl.col(cls.span_start), pl.col(cls.span_end)
        return data.lazyframe.select((start.is_null() & end.is_null()) | (start < end).fill_null(False))


PROPERTY_DTYPES = ["string", "date", "number", "boolean"]


class Properties(pa.DataFrameModel):
    """Entity -> property -> typed value, grounded in time (APEX-MEM's property memory).

    ``valid_from`` is when the value holds from (the fact's resolved date, else the session date),
    ``said_at`` when it was said. A later value of a single-valued property supersedes the earlier
    one: both rows stay, the earlier gets ``valid_to`` and the later names it in ``supersedes``.
    ``value`` is text; ``dtype`` says how to read it (dates ISO, numbers in digits, booleans true/false).
    """

    property_id: str = pa.Field(unique=True, str_matches=r"^v_[0-9a-f]{16}$")
    conversation_id: str = pa.Field()
    entity: str = pa.Field(str_length={"min_value": 1})
    entity_id: str = pa.Field(str_matches=r"^n_[0-9a-f]{16}$")
    property: str = pa.Field(str_matches=r"^[a-z0-9_]+$")
    value: str = pa.Field(str_length={"min_value": 1})
    dtype: str = pa.Field(isin=PROPERTY_DTYPES)
    single_valued: bool = pa.Field()
    valid_from: pl.Datetime("us") = pa.Field()
    valid_to: pl.Datetime("us") = pa.Field(nullable=True)
    said_at: pl.Datetime("us") = pa.Field()
    passage_id: str = pa.Field()
    supersedes: str = pa.Field(nullable=True)
    source: str = pa.Field()  # the fact it was derived from (fact id), or "llm" when the model stated it

    class Config:
        strict = True

    @pa.dataframe_check(error="a property row ends before it starts (valid_to < valid_from)")
    @classmethod
    def ordered_validity(cls, data) -> pl.LazyFrame:
        return data.lazyframe.select(pl.col(cls.valid_to).is_null() | (pl.col(cls.valid_to) >= pl.col(cls.valid_from)))

    @pa.dataframe_check(error="supersedes names no row of this table")
    @classmethod
    def supersedes_resolves(cls, data) -> pl.LazyFrame:
        frame = data.lazyframe
        known = frame.select(cls.property_id)
        return frame.select(pl.col(cls.supersedes).is_null() | pl.col(cls.supersedes).is_in(known.collect()[cls.property_id].implode()))


class Episodes(pa.DataFrameModel):
    """Fused events: every passage of one event, however far apart its turns are."""

    episode_id: str = pa.Field(unique=True, str_matches=r"^e_[0-9a-f]{16}$")
    conversation_id: str = pa.Field()
    summary: str = pa.Field(str_length={"min_value": 1})
    events: pl.List(EVENT) = pa.Field()
    passage_ids: pl.List(pl.String) = pa.Field()
    frame_ids: pl.List(pl.String) = pa.Field()
    first_time: pl.Datetime("us") = pa.Field()
    last_time: pl.Datetime("us") = pa.Field()

    class Config:
        strict = True

    @pa.dataframe_check(error="an episode has no passages, or a passage is in two episodes")
    @classmethod
    def passages_partitioned(cls, data) -> pl.LazyFrame:
        frame = data.lazyframe
        exploded = frame.select(pl.col(cls.passage_ids).explode().alias("p"))
        ok = (exploded.select(pl.col("p").is_duplicated().any().not_()).collect().item()
              and frame.select((pl.col(cls.passage_ids).list.len() > 0).all()).collect().item())
        return frame.select(pl.lit(ok).alias("ok"))


class Embeddings(pa.DataFrameModel):
    """Vectors of passages, their sentences (item id "passage id#n") and facts: what queries score (the
    retrieval index)."""

    kind: str = pa.Field(isin=["passage", "fact", "sentence"])
    item_id: str = pa.Field()
    vector: pl.Array(pl.Float32, 384) = pa.Field()
    model: str = pa.Field()

    class Config:
        strict = True


class Entities(pa.DataFrameModel):
    """Entities named by facts, merged on their normalised name; aliases are the spellings seen."""

    entity_id: str = pa.Field(unique=True, str_matches=r"^n_[0-9a-f]{16}$")
    conversation_id: str = pa.Field()
    name: str = pa.Field(str_length={"min_value": 1})
    aliases: pl.List(pl.String) = pa.Field()
    passage_ids: pl.List(pl.String) = pa.Field()

    class Config:
        strict = True


class GraphEdges(pa.DataFrameModel):
    """Undirected edges between entity and passage nodes; igraph is rebuilt from this on load."""

    source: str = pa.Field()
    target: str = pa.Field()
    kind: str = pa.Field(isin=["fact", "mention", "synonym"])
    weight: float = pa.Field(gt=0)

    class Config:
        strict = True


class Retrieved(pa.DataFrameModel):
    """Retrieved context for a question: ranked passages with their scores and reasons."""

    question_id: str = pa.Field()
    rank: int = pa.Field(ge=1)
    passage_id: str = pa.Field()
    source_ref: str = pa.Field()
    score: float = pa.Field()
    reason: str = pa.Field()

    class Config:
        strict = True


def dtypes(model) -> dict[str, pl.DataType]:
    """Column names and polars dtypes, in order, read off a schema (so they are written once)."""
    return {name: column.dtype.type for name, column in model.to_schema().columns.items()}


def table(model, rows: list, *, orient: str | None = None) -> pl.DataFrame:
    """A table with exactly the columns, order and dtypes of ``model``, from dict rows (or tuples with orient="row")."""
    return pl.DataFrame(rows, schema=dtypes(model), orient=orient)


def embeddings_frame(kind: str, item_ids: list[str], vectors, model: str, dim: int = 384) -> pl.DataFrame:
    return pl.DataFrame(
        {
            Embeddings.kind: [kind] * len(item_ids),
            Embeddings.item_id: item_ids,
            Embeddings.vector: vectors,
            Embeddings.model: [model] * len(item_ids),
        },
        schema={
            Embeddings.kind: pl.String(), Embeddings.item_id: pl.String(),
            Embeddings.vector: pl.Array(pl.Float32(), dim), Embeddings.model: pl.String(),
        },
    )


class LlmCalls(pa.DataFrameModel):
    """One row per model request of a build or query: which prompt for which passage, what it cost,
    and how it ended. ``status`` failed = output still invalid after the repair retry (``raw`` holds
    it); unanswered = no reply from the engine. ``calls`` and tokens are 0 for a cached result."""

    key: str = pa.Field()
    conversation_id: str = pa.Field()
    item_id: str = pa.Field()
    prompt: str = pa.Field()
    prompt_version: str = pa.Field()
    backend: str = pa.Field()
    model: str = pa.Field()
    status: str = pa.Field(isin=["ok", "failed", "unanswered"])
    cached: bool = pa.Field()
    calls: int = pa.Field(ge=0)
    prompt_tokens: int = pa.Field(ge=0)
    completion_tokens: int = pa.Field(ge=0)
    error: str = pa.Field(nullable=True)
    raw: str = pa.Field(nullable=True)

    class Config:
        strict = True
