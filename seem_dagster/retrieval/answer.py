"""A question through retrieval: encode it, rank the memory, cut to a date, build the context, answer.

``encode`` and ``rank`` are the two halves every caller shares: `Memory.query` runs them in ``ask``,
and `seem eval` runs ``encode`` once per question and ``rank`` once per method, so the method ``seem``
is measured on the very path a user's query takes. Pure apart from the model calls.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime

from seem_dagster.retrieval.as_of import property_histories, restrict
from seem_dagster.retrieval.context import Context, build_context
from seem_dagster.retrieval.index import MemoryIndex
from seem_dagster.retrieval.query import EncodedQuery, encode_query, form_of
from seem_dagster.retrieval.search import RetrievalConfig, RetrievalResult, retrieve
from seem_dagster.schemas import Passages


@dataclass
class Answered:
    question: str
    date: datetime
    result: RetrievalResult
    context: Context
    seconds: float
    answer: dict | None = None  # {"answer", "evidence"} from the answering model, when one is configured
    as_of: datetime | None = None  # the memory as it stood then (turns said later left out)


def ask(
    index: MemoryIndex, question: str, date: datetime | None, extractor, embedder, config: RetrievalConfig,
    *, budget_tokens: int, llm=None, as_of: datetime | None = None, property_lines: int = 0, answer: bool = True,
) -> Answered:
    """``llm`` (an LlmSession) extracts the query facts and answers from the context; without it the
    embedded extractor reads the question and the evidence is the output. ``as_of`` answers from the
    memory as it stood then; ``property_lines`` property histories (as of then) join the context;
    ``answer`` False: the model (if any) reads the question but does not answer."""
    date = date or (as_of if as_of is not None else index.passages[Passages.timestamp].max())
    started = time.perf_counter()
    # Without query facts the question is not read at all: no parse, no model call.
    facts = (llm.query_facts(question, date) if llm is not None else None) if config.query_facts else []
    result = rank(index, encode(index, question, date, extractor, embedder, config, facts=facts), config)
    if as_of is not None:
        result = restrict(index, result, as_of)
    seconds = time.perf_counter() - started
    histories = property_histories(index, [r.passage_id for r in result.ranked], as_of or date, property_lines)
    context = build_context(index, result, budget_tokens, histories=histories)
    reply = llm.answer(question, date, context.text) if llm is not None and answer else None
    return Answered(question, date, result, context, seconds, reply, as_of)


def encode(index: MemoryIndex, question: str, date: datetime, extractor, embedder, config: RetrievalConfig, *,
           facts: list | None = None, several: bool | None = None) -> EncodedQuery:
    """The question's vectors for this memory: its own, without the speakers' names (when the config
    matches unnamed), of its facts (``facts``: a model's, or None for the extractor's; [] for none),
    and whether it asks for several things (``several``: known already, or None to tag it here)."""
    conversation = index.passages[Passages.conversation_id][0] if index.passages.height else "query"
    return encode_query(question, date, extractor, embedder, conversation, facts=facts,
                        speakers=index.speakers if config.matches_unnamed else (),
                        several=form_of(question, config) if several is None else several)


def rank(index: MemoryIndex, query: EncodedQuery, config: RetrievalConfig) -> RetrievalResult:
    """SEEM's ranking of the memory for an encoded question under ``config``."""
    return retrieve(index, query.vector, query.fact_vectors, config, question_text=query.question, unnamed=query.unnamed_vector,
                    several=query.several)


def passages_json(index: MemoryIndex, answered: Answered, k: int) -> list[dict]:
    rows = {r[Passages.passage_id]: r for r in index.passages.iter_rows(named=True)}
    out = []
    for rank, item in enumerate(answered.result.ranked[:k], start=1):
        r = rows[item.passage_id]
        out.append(
            {
                "rank": rank,
                "passage_id": item.passage_id,
                "source_ref": r[Passages.source_ref],
                "speaker": r[Passages.speaker],
                "text": r[Passages.text],
                "timestamp": r[Passages.timestamp].isoformat(),
                "score": round(item.score, 6),
                "reason": str(item.reason),
            }
        )
    return out
