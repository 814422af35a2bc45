"""retrieved_context: every stored question of a conversation run through retrieval, with reasons."""

import numpy as np
import polars as pl
from dagster import AssetExecutionContext, AssetIn, MetadataValue, Output, ResourceParam, asset

from seem_dagster import backends
from seem_dagster.config import SeemConfig
from seem_dagster.defs.checks import check_specs, run_checks
from seem_dagster.defs.metadata import markdown_table, table_metadata
from seem_dagster.defs.partitions import conversations
from seem_dagster.retrieval.answer import ask
from seem_dagster.retrieval.index import MemoryIndex
from seem_dagster.retrieval.llm_session import LlmSession
from seem_dagster.schemas import Passages, Questions, Retrieved, table


@asset(
    partitions_def=conversations,
    ins={n: AssetIn() for n in ("questions", "passages", "facts", "entities", "episodes", "graph_edges", "retrieval_index", "properties")},
    group_name="query", kinds={"parquet", "igraph"}, io_manager_key="snapshot_io_manager",
    description="The retrieved context of every stored question: ranked passages, source refs, scores and the "
    "reason each passage is there (seed fact, PageRank, or the episode that expanded it). With a language "
    "model (resource llm) each question is also answered; the answers are in the metadata.",
    check_specs=check_specs("retrieved_context"),
)
def retrieved_context(
    context: AssetExecutionContext, questions, passages, facts, entities, episodes, graph_edges, retrieval_index, properties,
    seem: ResourceParam[SeemConfig],
):
    index = MemoryIndex.from_tables(passages, facts, entities, episodes, graph_edges, retrieval_index)
    index.properties = properties
    session = LlmSession(seem.llm, seem.store.root, context.partition_key) if seem.llm.enabled else None
    answers = []
    extractor, embedder = backends.extractor(seem.extraction.extractor), backends.query_embedder(seem.extraction.embedder)
    refs = dict(zip(passages[Passages.passage_id].to_list(), passages[Passages.source_ref].to_list()))
    rows, seconds, recalls = [], [], []
    for q in questions.iter_rows(named=True):
        answered = ask(index, q[Questions.question], q[Questions.question_date], extractor, embedder, seem.retrieval,
                       budget_tokens=seem.query.budget_tokens, llm=session, property_lines=seem.properties.context_lines)
        seconds.append(answered.seconds)
        if session is not None:
            answers.append((q[Questions.question_id], q[Questions.question], (answered.answer or {}).get("answer"), q[Questions.answer]))
        top = answered.result.ranked[: seem.query.k]
        for rank, item in enumerate(top, start=1):
            rows.append((q[Questions.question_id], rank, item.passage_id, refs[item.passage_id], item.score, str(item.reason)))
        gold = set(q[Questions.evidence])
        if gold:
            found = {refs[i.passage_id] for i in top[:10]}
            recalls.append(len(gold & found) / len(gold))
    retrieved = table(Retrieved, rows, orient="row")
    yield Output(
        retrieved,
        metadata={
            **table_metadata(retrieved, [Retrieved.question_id, Retrieved.rank, Retrieved.source_ref, Retrieved.reason], text=[Retrieved.reason]),
            "questions": MetadataValue.int(questions.height),
            "latency_p50_ms": MetadataValue.float(round(float(np.percentile(seconds, 50)) * 1000, 1) if seconds else 0.0),
            "latency_p95_ms": MetadataValue.float(round(float(np.percentile(seconds, 95)) * 1000, 1) if seconds else 0.0),
            "evidence_recall_at_10": MetadataValue.float(round(float(np.mean(recalls)), 3) if recalls else 0.0),
            **(_answer_metadata(answers, session) if session is not None else {"answers": MetadataValue.text("no language model configured (resource llm)")}),
        },
    )
    yield from run_checks({"retrieved_context": retrieved})


def _answer_metadata(answers: list[tuple], session: LlmSession) -> dict:
    frame = pl.DataFrame(answers, schema=["question_id", "question", "answer", "gold"], orient="row")
    return {
        "answers": MetadataValue.md(markdown_table(frame, rows=30, width=120, text=["answer"])),
        "answer_failures": MetadataValue.int(frame["answer"].null_count()),
        "llm_calls": MetadataValue.int(sum(r.calls for r in session.records)),
    }
