"""A fact's vector pooled from its passage's own forward pass: no second pass of the model for the
facts the extractor placed in their passage; dated facts, facts that state a single-valued property
and facts without a place embedded alone."""

import numpy as np
import polars as pl
import pytest

from seem_dagster.embeddings import CachedEmbedder, MiniLMEmbedder
from seem_dagster.retrieval.index import fact_text, passage_text, pooled_fact_spans
from seem_dagster.schemas import Facts, Passages


def test_the_spans_are_shifted_past_the_speakers_name_and_dated_or_single_valued_facts_stay_alone():
    passages = pl.DataFrame({Passages.passage_id: ["p1", "p2"], Passages.speaker: ["Ann", "Bo"]})
    facts = pl.DataFrame({
        Facts.fact_id: ["t1", "t2", "t3", "t4", "t5"],
        Facts.passage_id: ["p1", "p1", "p2", "p9", "p2"],
        Facts.span_start: [4, 0, None, 1, 0],
        Facts.span_end: [10, 3, None, 2, 12],
        Facts.time: [None, "2024-01-01", None, None, None],
        Facts.relation: ["adopt", "adopt", "adopt", "adopt", "live in"],  # living somewhere is single-valued
        Facts.object: ["beagle", "cat", "cat", "cat", "Leeds"],
    })
    # "Ann: " is five characters: the fact's 4-10 of the text is 9-15 of the embedded string.
    assert pooled_fact_spans(passages, facts) == {"p1": [("t1", ((0, 3), (9, 15)))]}


class Counting:
    """The real MiniLM, recording what it is asked (not a stand-in: every vector is the model's)."""

    def __init__(self):
        self.model, self.calls = MiniLMEmbedder(), []
        self.name, self.dim = self.model.name, self.model.dim

    def encode(self, texts):
        self.calls.append(list(texts))
        return self.model.encode(texts)

    def encode_pooled(self, texts, spans):
        self.calls.append(list(texts))
        return self.model.encode_pooled(texts, spans)


def test_the_cache_runs_a_text_through_the_model_once_for_its_vector_and_its_spans():
    model = Counting()
    cached = CachedEmbedder(model)
    text = "Ann: I adopted a beagle yesterday!"
    adopted, past_the_end = ((0, 3), (7, 23)), ((500, 600),)
    vectors, pooled = cached.encode_pooled([text], [[adopted]])
    assert model.calls == [[text]] and pooled[0][0] is not None
    assert np.array_equal(cached.encode([text]), vectors) and len(model.calls) == 1  # the text's vector came with it
    again, pooled_again = cached.encode_pooled([text], [[adopted]])
    assert len(model.calls) == 1 and np.array_equal(pooled_again[0][0], pooled[0][0])
    # A span the model has no token for is kept (as zeros) and not asked again.
    assert cached.encode_pooled([text], [[past_the_end]])[1] == [[None]] and len(model.calls) == 2
    assert cached.encode_pooled([text], [[past_the_end]])[1] == [[None]] and len(model.calls) == 2
    # Through the cache's table, as the next run loads it.
    reloaded = CachedEmbedder(model, cached.table())
    _, both = reloaded.encode_pooled([text], [[adopted, past_the_end]])
    assert len(model.calls) == 2 and np.array_equal(both[0][0], pooled[0][0]) and both[0][1] is None


@pytest.mark.slow
def test_a_built_memory_pools_most_facts_and_embeds_the_others_alone(sample_store):
    from seem_dagster.retrieval.load import load_index

    index = load_index(sample_store, "priya-tomas")
    minilm = MiniLMEmbedder()
    row = {f: i for i, f in enumerate(index.facts[Facts.fact_id].to_list())}
    texts = {p: passage_text(s, t) for p, s, t in index.passages.select(Passages.passage_id, Passages.speaker, Passages.text).iter_rows()}
    spans = pooled_fact_spans(index.passages, index.facts)
    for pid, items in spans.items():
        _, (pooled,) = minilm.encode_pooled([texts[pid]], [[r for _, r in items]])
        for (fact_id, _), vector in zip(items, pooled):
            assert np.array_equal(index.fact_vectors[row[fact_id]], vector), fact_id
    pooled_ids = {f for items in spans.values() for f, _ in items}
    alone = [(f, fact_text(s, r, o)) for f, s, r, o in
             index.facts.select(Facts.fact_id, Facts.subject, Facts.relation, Facts.object).iter_rows() if f not in pooled_ids]
    assert pooled_ids and alone
    assert np.array_equal(index.fact_vectors[[row[f] for f, _ in alone]], minilm.encode([t for _, t in alone]))


@pytest.mark.slow
def test_the_embedded_facts_ablation_ranks_the_same_memory_with_the_facts_embedded_alone(sample_store):
    from datetime import datetime

    from seem_dagster.config import RetrievalConfig
    from seem_dagster.evaluation.methods import rankers
    from seem_dagster.evaluation.prepared import Prepared
    from seem_dagster.retrieval.load import load_index
    from seem_dagster.retrieval.query import EncodedQuery
    from seem_dagster.retrieval.search import retrieve

    index, minilm = load_index(sample_store, "priya-tomas"), MiniLMEmbedder()
    question = "What did Tomas adopt?"
    query = EncodedQuery(question, datetime(2024, 6, 1), minilm.encode([question])[0], [], np.zeros((0, 384), np.float32))
    prepared = Prepared()
    rank = rankers(RetrievalConfig(), ["seem-embedded-facts"], prepared=prepared)["seem-embedded-facts"]
    with pytest.raises(ValueError, match="embed_facts_alone was not run"):
        rank(index, query)
    alone = minilm.encode([fact_text(*r) for r in index.facts.select(Facts.subject, Facts.relation, Facts.object).iter_rows()])
    pooled = index.fact_vectors
    assert not np.array_equal(pooled, alone)
    prepared.embed_facts_alone(index, minilm)
    assert np.array_equal(prepared.fact_vectors_alone["priya-tomas"], alone)
    other = load_index(sample_store, "priya-tomas")
    other.fact_vectors = alone
    def scored(result):
        return [(r.passage_id, round(r.score, 12)) for r in result.ranked]

    got = scored(rank(index, query))
    assert got == scored(retrieve(other, query.vector, query.fact_vectors, RetrievalConfig(), question_text=question))
    # The pooled vectors walk to other PageRank masses: a ranker that kept them would differ here.
    assert got != scored(retrieve(index, query.vector, query.fact_vectors, RetrievalConfig(), question_text=question))
    assert index.fact_vectors is pooled  # the memory the other methods rank is not changed


@pytest.mark.slow
def test_extraction_fact_vectors_embedded_embeds_every_fact_alone_and_the_memory_says_so(tmp_path):
    from conftest import build_sample
    from seem_dagster.retrieval.load import load_index
    from seem_dagster.store import snapshot

    store = tmp_path / "store"
    build_sample(store, {"extraction.fact_vectors": "embedded"})
    index = load_index(store, "priya-tomas")
    texts = [fact_text(*r) for r in index.facts.select(Facts.subject, Facts.relation, Facts.object).iter_rows()]
    assert np.array_equal(index.fact_vectors, MiniLMEmbedder().encode(texts))
    footer = snapshot.read_footer(snapshot.table_path(store, "retrieval_index", "priya-tomas"))
    assert footer["stage"]["fact_vectors"] == "embedded"


def test_the_facts_schema_refuses_a_reversed_or_half_span():
    import pandera.errors

    from seem_dagster.schemas import table

    row = {Facts.fact_id: "t_0123456789abcdef", Facts.conversation_id: "c", Facts.subject: "Ann", Facts.relation: "adopt",
           Facts.object: "beagle", Facts.time: None, Facts.time_text: None, Facts.span_start: 2, Facts.span_end: 18,
           Facts.passage_id: "p1", Facts.extractor: "embedded-spacy"}
    Facts.validate(table(Facts, [row, row | {Facts.fact_id: "t_0123456789abcdee", Facts.span_start: None, Facts.span_end: None}]))
    for start, end in ((18, 2), (2, None)):
        with pytest.raises(pandera.errors.SchemaError, match="span_start < span_end"):
            Facts.validate(table(Facts, [row | {Facts.span_start: start, Facts.span_end: end}]))
