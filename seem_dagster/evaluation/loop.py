"""The timed loop: every stored question of every conversation encoded once through ``Memory`` and
ranked by every method, each ranking scored as its benchmark scores it and timed as a user pays for it.

A method's latency is its ranking plus what its query needed encoded: nothing (BM25), the question's
vector, that and the vector without the speakers' names, or those and the question's own facts
(``evaluation.methods.query_encoding``), and the question's form when it reads it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from seem_dagster import backends
from seem_dagster.config import SeemConfig
from seem_dagster.evaluation.methods import Ranker, ids, method_config, query_encoding, reads_form
from seem_dagster.evaluation.metrics import is_abstention, normalise_locomo_evidence
from seem_dagster.evaluation.prepared import Prepared
from seem_dagster.evaluation.qa import QaItem, answer_and_judge
from seem_dagster.evaluation.scoring import LocomoQuestion, locomo_category, score_lme_question, score_locomo
from seem_dagster.evaluation.timing import TRACE_QUERIES, timed, trace_peak
from seem_dagster.memory import Memory
from seem_dagster.pipeline.embedding import cached_embedder, save_vectors
from seem_dagster.retrieval.context import build_context
from seem_dagster.retrieval.llm_session import LlmSession
from seem_dagster.retrieval.query import form_of
from seem_dagster.schemas import Passages, Questions
from seem_dagster.store.cache import ConversationCache
from seem_dagster.store.snapshot import read_table, table_path

GRANULARITIES = ("turn", "session")


@dataclass
class Collected:
    """What the loop gathers over every conversation, per method."""

    latencies: dict[str, list[float]]
    locomo: dict[str, list[LocomoQuestion]]
    longmemeval: dict[str, dict[str, list]]  # method -> granularity -> [(question type, scores)]
    traced: dict[str, float] = field(default_factory=dict)  # method -> peak MiB of one traced query
    excluded_abstention: int = 0
    qa_results: list = field(default_factory=list)
    qa_records: list = field(default_factory=list)
    passage_texts: list[str] = field(default_factory=list)


class QueryLoop:
    """Ranks and scores one benchmark's questions with ``methods`` (name -> ranker) over ``memory``."""

    def __init__(self, memory: Memory, benchmark: str, config: SeemConfig, methods: dict[str, Ranker], prepared: Prepared,
                 ks: list[int], budgets: list[int], granularities: list[str]):
        self.memory, self.benchmark, self.config, self.methods, self.prepared = memory, benchmark, config, methods, prepared
        self.ks, self.budgets, self.granularities = ks, budgets, granularities
        self.encoding = {m: query_encoding(config.retrieval, m) for m in methods}
        self.form_read = {m: reads_form(config.retrieval, m) for m in methods}
        # A method that composes the named question's vector otherwise than the configuration (its
        # ablation) needs the question encoded its way: the settings to encode it with, per method (one
        # encoding per distinct setting and question, charged to its methods).
        self.recompose = {m: config.retrieval.replace(compose_names=method_config(config.retrieval, m).compose_names) for m in methods
                          if self.encoding[m] in ("vectors", "full")
                          and method_config(config.retrieval, m).compose_names != config.retrieval.compose_names}
        self.read_question = "full" in self.encoding.values()  # else no method uses the question's facts: never parse it
        self.question_embedder = None
        self.collected = Collected({m: [] for m in methods}, {m: [] for m in methods}, {m: {g: [] for g in granularities} for m in methods})

    def conversation(self, cid: str) -> None:
        """Every question of one conversation, then the conversation's memory unloaded."""
        if self.question_embedder is None:
            self.question_embedder = backends.query_embedder(self.config.extraction.embedder)  # what a query encodes with
        store, config = self.memory.store, self.config
        index = self.memory.index(cid)
        questions = read_table(table_path(store, "questions", cid))
        passages = index.passages
        ref_of = dict(zip(passages[Passages.passage_id].to_list(), passages[Passages.source_ref].to_list()))
        speaker_of = dict(zip(passages[Passages.passage_id].to_list(), passages[Passages.speaker].to_list()))
        self.collected.passage_texts.extend(passages[Passages.text].to_list())
        latest = passages[Passages.timestamp].max()
        for stems in {method_config(config.retrieval, m).lexical_stems for m in self.methods}:
            index.lexical(stems)  # built once per conversation, outside the query timings
        if self.prepared.needs_fact_vectors(list(self.methods)):
            vectors = ConversationCache(store, cid)
            cached = cached_embedder(vectors, config.extraction.embedder)
            self.prepared.embed_facts_alone(index, cached)
            save_vectors(vectors, cached)
        session = LlmSession(config.llm, store, cid) if config.llm.enabled else None
        qa_items: list[QaItem] = []
        for q in questions.iter_rows(named=True):
            if self.benchmark == "longmemeval" and is_abstention(q[Questions.question_id]):
                self.collected.excluded_abstention += 1
                continue
            self._question(cid, index, q, q[Questions.question_date] or latest, session, qa_items, ref_of, speaker_of)
        if session and qa_items:
            self.collected.qa_results.extend(answer_and_judge(session, qa_items))
        if session:
            self.collected.qa_records.extend(session.records)
        self.prepared.drop(cid)
        self.memory.unload(cid)

    def _question(self, cid, index, q: dict, date, session, qa_items: list[QaItem], ref_of: dict, speaker_of: dict) -> None:
        memory, config, c = self.memory, self.config, self.collected
        question = q[Questions.question]
        # The question's own vector, encoded as asked: what a method that reads one vector ranks with
        # (dense, hybrid, and a method that does not match without the speakers' names), never the
        # vector `seem` composes for a question that names a speaker (retrieval.compose_names).
        as_asked, vector_s = timed(lambda: self.question_embedder.encode([question])[0])
        facts = (session.query_facts(question, date) if session else None) if self.read_question else []
        # Whether it asks for several things: tagged once, charged to the methods that use it.
        several, form_s = timed(lambda: form_of(question, config.retrieval) if any(self.form_read.values()) else False)
        query, encode_s = timed(lambda: memory.encode(cid, question, date, facts=facts, several=several))
        # What a method that reads no facts pays: the question's vectors (with its form without the speakers' names).
        vectors_s = timed(lambda: memory.encode(cid, question, date, facts=[], several=False))[1] if self.read_question else encode_s
        paid = {"none": 0.0, "vector": vector_s, "vectors": vectors_s, "full": encode_s}
        recomposed = {}  # (compose_names, reads the question's facts) -> the question encoded so, and its seconds
        for name, retrieval in self.recompose.items():
            key = (retrieval.compose_names, self.encoding[name] == "full")
            if key not in recomposed:
                recomposed[key] = timed(lambda: memory.encode(cid, question, date, facts=facts if key[1] else [], several=several,
                                                              retrieval=retrieval))
        for name, rank in self.methods.items():
            if name in self.recompose:
                asked, encoded_s = recomposed[(self.recompose[name].compose_names, self.encoding[name] == "full")]
            else:
                asked = replace(query, vector=as_asked) if self.encoding[name] == "vector" else query
                encoded_s = paid[self.encoding[name]]
            result, rank_s = timed(lambda: rank(index, asked))
            ranking = ids(result)
            c.latencies[name].append(rank_s + encoded_s + (form_s if self.form_read[name] else 0.0))
            if name not in c.traced and len(c.latencies[name]) == TRACE_QUERIES:
                c.traced[name] = trace_peak(rank, index, asked)
            refs = [ref_of[p] for p in ranking]
            if session and name in config.evaluation.answer_methods and q[Questions.answer]:
                # Each method answers from its own context: SEEM's with its frames and seed facts.
                context = build_context(index, result, config.evaluation.answer_budget).text
                qa_items.append(QaItem(name, q[Questions.question_id], question, date, q[Questions.answer], context))
            if self.benchmark == "locomo":
                gold = normalise_locomo_evidence(q[Questions.evidence], set(ref_of.values()))
                in_context = {b: [ref_of[p] for p in build_context(index, result, b).passage_ids] for b in self.budgets}
                c.locomo[name].append(LocomoQuestion(locomo_category(q[Questions.category]),
                                                     score_locomo(gold, refs, self.ks, in_context), cid))
            else:
                speakers = [speaker_of[p] for p in ranking]
                for granularity in GRANULARITIES:
                    if granularity in c.longmemeval[name]:
                        c.longmemeval[name][granularity].append(
                            (q[Questions.category] or "none", score_lme_question(granularity, q, refs, speakers, ref_of.values())))
