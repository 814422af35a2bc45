"""A question through retrieval: encode it, rank the memory, cut to a date, build the context, answer.

``encode`` and ``rank`` are the two halves every caller shares: `Memory.query` runs them in ``ask``,
and `seem eval` runs ``encode`` once per question and ``rank`` once per method, so the method ``seem``
is measured on the very path a user's query takes. Pure apart from the model calls.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime

from seem_dagster.retrieval.as_of import property_histories, restrict
from seem_dagster.retrieval.context import Context, build_context
from seem_dagster.retrieval.index import MemoryIndex
from seem_dagster.retrieval.query import EncodedQuery, encode_query, form_of
from seem_dagster.retrieval.rerank import RerankModel
from seem_dagster.retrieval.search import Ranked, RetrievalConfig, RetrievalResult, retrieve
from seem_dagster.schemas import Passages


@dataclass
class Answered:
    question: str
    date: datetime
    result: RetrievalResult
    context: Context | None  # None when only the ranking was asked for
    seconds: float
    answer: dict | None = None  # {"answer", "evidence"} from the answering model, when one is configured
    as_of: datetime | None = None  # the memory as it stood then (turns said later left out)


def ask(
    index: MemoryIndex, question: str, date: datetime | None, extractor, embedder, config: RetrievalConfig,
    *, budget_tokens: int, llm=None, as_of: datetime | None = None, property_lines: int = 0, answer: bool = True,
    context: bool = True,
) -> Answered:
    """``llm`` (an LlmSession) extracts the query facts and answers from the context; without it the
    embedded extractor reads the question and the evidence is the output. ``as_of`` answers from the
    memory as it stood then; ``property_lines`` property histories (as of then) join the context;
    ``answer`` False: the model (if any) reads the question but does not answer; ``context`` False:
    the ranking alone (no context is rendered, so nothing can be answered from it)."""
    date = date or (as_of if as_of is not None else index.passages[Passages.timestamp].max())
    started = time.perf_counter()
    # Without query facts the question is not read at all: no parse, no model call.
    facts = (llm.query_facts(question, date) if llm is not None else None) if config.query_facts else []
    result = rank(index, encode(index, question, date, extractor, embedder, config, facts=facts), config)
    if as_of is not None:
        result = restrict(index, result, as_of)
    seconds = time.perf_counter() - started
    if not context:
        return Answered(question, date, result, None, seconds, None, as_of)
    histories = property_histories(index, [r.passage_id for r in result.ranked], as_of or date, property_lines)
    rendered = build_context(index, result, budget_tokens, histories=histories)
    reply = llm.answer(question, date, rendered.text) if llm is not None and answer else None
    return Answered(question, date, result, rendered, seconds, reply, as_of)


def encode(index: MemoryIndex, question: str, date: datetime, extractor, embedder, config: RetrievalConfig, *,
           facts: list | None = None, several: bool | None = None) -> EncodedQuery:
    """The question's vectors for this memory: its own, without the speakers' names (when the config
    matches unnamed), of its facts (``facts``: a model's, or None for the extractor's; [] for none),
    and whether it asks for several things (``several``: known already, or None to tag it here)."""
    conversation = index.passages[Passages.conversation_id][0] if index.passages.height else "query"
    return encode_query(question, date, extractor, embedder, conversation, facts=facts,
                        speakers=index.speakers if config.matches_unnamed else (),
                        several=form_of(question, config) if several is None else several, compose_names=config.compose_names)


def rank(index: MemoryIndex, query: EncodedQuery, config: RetrievalConfig, *, rerankers: Mapping[str, RerankModel] | None = None,
         ) -> RetrievalResult:
    """SEEM's ranking of the memory for an encoded question under ``config``; a question about several
    events (``split_events``) is ranked once per event as well, and the rankings merged (``merge_events``).
    ``rerankers``: the reranker's models where not the bundled ones (``retrieve``)."""
    whole = _retrieve(index, query, config, rerankers)
    if not (config.split_events and query.parts):
        return whole
    return merge_events(whole, [(part.question, _retrieve(index, part, config, rerankers)) for part in query.parts])


def _retrieve(index: MemoryIndex, query: EncodedQuery, config: RetrievalConfig, rerankers) -> RetrievalResult:
    return retrieve(index, query.vector, query.fact_vectors, config, question_text=query.question, unnamed=query.unnamed_vector,
                    several=query.several, window=query.window, latest=query.latest, advice=query.advice, rerankers=rerankers)


def merge_events(whole: RetrievalResult, parts: list[tuple[str, RetrievalResult]]) -> RetrievalResult:
    """Turn by turn: each event's next best turn, then the whole question's, until every ranking is
    used up; a turn already placed is skipped. Every event's best turns reach the top whatever their
    scores (one score would let the best-matched event fill it)."""
    rankings = [(event, result.ranked) for event, result in parts] + [(None, whole.ranked)]
    placed: dict[str, Ranked] = {}
    depth = max(len(r) for _, r in rankings)
    for i in range(depth):
        for event, ranked in rankings:
            if i < len(ranked) and ranked[i].passage_id not in placed:
                item = ranked[i]
                placed[item.passage_id] = item if event is None else replace(item, reason=replace(item.reason, event=event))
    seeds = list({s.fact_id: s for s in [*whole.seeds, *(s for _, r in parts for s in r.seeds)]}.values())
    episodes = list(dict.fromkeys([*whole.episodes, *(e for _, r in parts for e in r.episodes)]))
    return replace(whole, ranked=list(placed.values()), seeds=seeds, episodes=episodes)


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
