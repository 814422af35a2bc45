"""Which cache entries a published memory was made from: what a forget keeps, everything else goes.

The keyed caches (extraction results, model replies, vectors by text) only grow: an entry stays after
the input that made it is gone. After a forget, an entry that no turn of the memory would ask for
again is, by construction, one that only forgotten turns (or older inputs and settings) made, so
keeping exactly the entries the memory's own tables would ask for removes every trace of the
forgotten turns without having to trace what each one produced. The sets below replay the keys the
steps ask for (``extract``, ``episodes``, ``graph``, ``index``, and the evaluation's facts embedded
alone); a key missed here costs a cache miss later, never a leftover.
"""

from __future__ import annotations

import polars as pl

from seem_dagster import backends
from seem_dagster.config import SeemConfig
from seem_dagster.embeddings.cache import span_hash, text_hash
from seem_dagster.episodic.extraction.interface import inputs_from_passages
from seem_dagster.pipeline.embedding import KIND as EMBEDDINGS
from seem_dagster.pipeline.extract import cache_name
from seem_dagster.retrieval.index import fact_text, passage_spans, passage_text
from seem_dagster.schemas import Entities, EventFrames, Facts, LlmCalls, Passages

EXTRACTION, LLM = "extraction", "llm"
# The keyed caches; any other cache of a conversation holds whole tables made from all its turns
# (saved fusion, synonym comparisons, properties, the judge's and the query-time model's replies):
# a forget removes those before its rebuild, which writes them again from the turns that stay.
KEYED = (EXTRACTION, LLM, EMBEDDINGS)


def live_keys(tables: dict[str, pl.DataFrame], config: SeemConfig) -> dict[str, set[str] | dict[str, set[str]]]:
    """kind -> the keys the memory in ``tables`` (passages, facts, event_frames, entities, llm_calls)
    asks its caches for; for ``extraction``, cache name -> keys (an entry of another extractor or
    version is not the current memory's)."""
    passages, facts = tables["passages"], tables["facts"]
    extractor = backends.extractor(config.extraction.extractor)
    inputs = inputs_from_passages(passages)
    extraction = {cache_name(extractor): {inp.cache_key(extractor.name, extractor.version) for inp in inputs}}
    texts = {passage_text(s, t) for s, t in passages.select(Passages.speaker, Passages.text).iter_rows()}
    texts |= {fact_text(*r) for r in facts.select(Facts.subject, Facts.relation, Facts.object).iter_rows()}
    texts |= set(tables["event_frames"][EventFrames.summary].to_list())
    texts |= set(tables["entities"][Entities.name].to_list())
    vectors = {text_hash(t) for t in texts}
    spoken = {pid: passage_text(s, t) for pid, s, t in passages.select(Passages.passage_id, Passages.speaker, Passages.text).iter_rows()}
    for pid, spans in passage_spans(passages, facts).items():
        vectors |= {span_hash(spoken[pid], ranges) for _, _, ranges in spans}
    replies = set(tables["llm_calls"][LlmCalls.key].to_list()) if "llm_calls" in tables else set()
    return {EXTRACTION: extraction, EMBEDDINGS: vectors, LLM: replies}
