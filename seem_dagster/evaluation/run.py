"""`seem eval`: build every conversation's memory once (through Dagster), rank with every method, score.

Memories live in a store kept between runs. A conversation's memory is reused only when the stored
tables agree with each other and each one's build record (its stage settings and code versions,
``pipeline.stages``) equals what the current configuration would make, and its input is unchanged
since registration; any setting that shapes the memory (ingest, extraction, fusion, synonyms, the
model) therefore rebuilds it. A memory built outside `seem eval` (`seem build`, a schedule, the
Dagster UI) is reused the same way: a published memory passed every blocking check. The reused
build's stage timings are carried over (marked ``cached``) when an evaluation build made it; one built
elsewhere left none, and the build figures say how many conversations they leave out.
"""

from __future__ import annotations

import json
import platform
import resource
import statistics
import time
import tracemalloc
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from seem_dagster import backends
from seem_dagster import methods as registry
from seem_dagster.config import Layer, Resolved, SeemConfig, resolve_standard
from seem_dagster.evaluation.ablation import differences, locomo_columns, longmemeval_columns
from seem_dagster.evaluation.methods import ids, method_config, query_encoding, rankers, reads_form
from seem_dagster.evaluation.metrics import is_abstention, longmemeval_session_gold, normalise_locomo_evidence
from seem_dagster.evaluation.qa import QaItem, answer_and_judge, summarise_qa
from seem_dagster.evaluation.scoring import (
    LME_KS,
    LocomoQuestion,
    locomo_category,
    score_locomo,
    score_longmemeval,
    summarise_locomo,
    summarise_longmemeval,
)
from seem_dagster.ingest.longmemeval import session_of
from seem_dagster.llm.session import LlmSession
from seem_dagster.memory import Memory
from seem_dagster.pipeline.embedding import cached_embedder, save_vectors
from seem_dagster.pipeline.stages import MEMORY_TABLES
from seem_dagster.retrieval.context import build_context
from seem_dagster.retrieval.index import fact_text
from seem_dagster.retrieval.lexical import Bm25
from seem_dagster.retrieval.query import form_of
from seem_dagster.schemas import Facts, Passages, Questions
from seem_dagster.store.cache import ConversationCache
from seem_dagster.store.files import write_bytes_atomic
from seem_dagster.store.snapshot import read_footers, read_table, table_path

BENCHMARKS = ("locomo", "longmemeval")
TRACE_QUERIES = 20  # queries per method traced for memory (tracemalloc slows them; not timed)
DENSE_BUILD_SAMPLE = 500  # passages embedded uncached to time the dense baseline's build
# LongMemEval_S's haystacks hold user turns of up to 76,560 characters (pasted documents and code):
# the benchmark's protocol reads them whole, where a user's own input keeps ingest.max_turn_chars.
LONGMEMEVAL_TURN_CHARS = 200_000
PACKAGES = ("seem-dagster", "dagster", "polars", "igraph", "spacy", "torch", "sentence-transformers", "bm25s")


@dataclass
class EvalRun:
    """One evaluation: the benchmark file and where results go. Everything else is configuration
    (section ``evaluation`` and the memory's own settings)."""

    benchmark: str
    data: str
    out: str
    store: str | None = None  # default OUT/store, never the configured store.root (benchmarks stay out of it)
    conversations: list[str] | None = None
    progress: bool = True

    def protocol(self, store: str, config: SeemConfig) -> Layer:
        """What the benchmark's protocol fixes, on top of every other layer."""
        values: dict = {"store.root": store}
        if self.benchmark == "longmemeval":
            # One public haystack turn is empty; it is skipped and reported, as `seem build` with ingest.allow_empty_turns.
            values |= {"ingest.allow_empty_turns": True, "ingest.max_turn_chars": LONGMEMEVAL_TURN_CHARS,
                       "ingest.only_speakers": ["user"] if config.evaluation.corpus == "user" else None}
        return Layer(f"seem eval {self.benchmark}", values)


def check(run: EvalRun, config: SeemConfig) -> None:
    if run.benchmark not in BENCHMARKS:
        raise ValueError(f"unknown benchmark {run.benchmark!r}; choose from {', '.join(BENCHMARKS)}")
    ev = config.evaluation
    if config.llm.enabled and not set(ev.answer_methods) <= set(ev.methods):
        raise ValueError(f"evaluation.answer_methods {','.join(ev.answer_methods)}: each must be one of the evaluated methods")


def _progress(items, enabled: bool, **kw):
    if not enabled:
        return items
    from tqdm import tqdm

    return tqdm(items, **kw)


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def _build_record_path(store: str, conversation_id: str):
    """``<store>/_eval/<conversation>.json``: a path in the store, a local folder or an object store."""
    from seem_dagster.store.files import as_root
    from seem_dagster.store.keys import file_stem

    return as_root(store) / "_eval" / f"{file_stem(conversation_id)}.json"


def build_timings(store: str, conversation_id: str) -> dict | None:
    """The record an evaluation build left for the published memory (its stage timings), or None when
    none did: the memory was built by `seem build`, a schedule or the Dagster UI, or the record is of
    an older build than the one published."""
    record_path = _build_record_path(store, conversation_id)
    record = json.loads(record_path.read_text()) if record_path.exists() else {}
    builds = {f.get("build_id") for f in read_footers(store, conversation_id, MEMORY_TABLES).values()}
    return record if builds == {record.get("build_id")} else None


def build_memories(run: EvalRun, memory: Memory) -> dict:
    """Build (or reuse) every conversation's memory through ``memory``; per-stage seconds per conversation."""
    from seem_dagster.memory.writes import BuildsFailed

    store = memory.store
    try:
        results = memory.add_file(run.data, run.benchmark, conversations=run.conversations, progress=run.progress)
    except BuildsFailed as err:
        for r in err.results:
            if r.status == "failed":
                _build_record_path(store, r.conversation_id).unlink(missing_ok=True)
        failed = [r for r in err.results if r.status == "failed"]
        raise RuntimeError(f"{len(failed)} memory builds failed; {str(err).split('; ', 1)[1]}") from None
    builds: dict[str, dict] = {}
    for r in results:
        if r.status in ("empty", "forgotten"):
            continue
        if r.status == "current":
            # A published memory passed every blocking check, whoever built it: rebuilding one made
            # by `seem build` only to time it would cost a Dagster run per conversation.
            timed = build_timings(store, r.conversation_id)
            builds[r.conversation_id] = {**(timed or {"passages": r.passages, "excluded_turns": r.excluded,
                                                      "skipped_turns": list(r.skipped)}), "cached": True, "timed": timed is not None}
            continue
        entry = {"build_id": r.build_id, "passages": r.passages, "excluded_turns": r.excluded, "skipped_turns": list(r.skipped),
                 "stage_seconds": r.step_seconds}
        write_bytes_atomic(_build_record_path(store, r.conversation_id), json.dumps(entry, indent=2).encode())
        builds[r.conversation_id] = {**entry, "cached": False, "timed": True}
    return builds


def _timed(fn):
    started = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - started


def _percentiles(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"p50_ms": None, "p95_ms": None}
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]
    return {"p50_ms": statistics.median(ordered) * 1000, "p95_ms": p95 * 1000}


def run_evaluation(run: EvalRun, resolved: Resolved | None = None) -> str:
    resolved = resolved or resolve_standard()
    out = Path(run.out)
    store = run.store or str(out / "store")
    resolved = resolved.over(run.protocol(store, resolved.config))
    config = resolved.config
    check(run, config)
    ev = config.evaluation
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    memory = Memory(resolved)
    builds, build_s = _timed(lambda: build_memories(run, memory))
    extractor, embedder = backends.extractor(config.extraction.extractor), backends.embedder(config.extraction.embedder)
    question_embedder = backends.query_embedder(config.extraction.embedder)  # what a query encodes with
    methods = rankers(config.retrieval, ev.methods, config.properties)
    encoding = {m: query_encoding(config.retrieval, m) for m in methods}
    form_read = {m: reads_form(config.retrieval, m) for m in methods}
    read_question = "full" in encoding.values()  # else no method uses the question's facts: never parse it
    ks = list(ev.ks) if run.benchmark == "locomo" else list(LME_KS)
    budgets = list(ev.budgets) if run.benchmark == "locomo" else []
    granularities = list(dict.fromkeys(ev.granularities))
    latencies: dict[str, list[float]] = {m: [] for m in methods}
    traced: dict[str, float] = {}
    locomo_rows: dict[str, list[LocomoQuestion]] = {m: [] for m in methods}
    lme_rows: dict[str, dict[str, list]] = {m: {g: [] for g in granularities} for m in methods}
    excluded_abstention = 0
    qa_results: list = []
    qa_records: list = []
    all_passage_texts: list[str] = []
    query_started = time.perf_counter()
    for cid in _progress(list(builds), run.progress, desc="querying", unit="conversation"):
        index = memory.index(cid)
        questions = read_table(table_path(store, "questions", cid))
        passages = index.passages
        ref_of = dict(zip(passages[Passages.passage_id].to_list(), passages[Passages.source_ref].to_list()))
        speaker_of = dict(zip(passages[Passages.passage_id].to_list(), passages[Passages.speaker].to_list()))
        all_passage_texts.extend(passages[Passages.text].to_list())
        latest = passages[Passages.timestamp].max()
        for stems in {method_config(config.retrieval, m).lexical_stems for m in methods}:
            index.lexical(stems)  # built once per conversation, outside the query timings
        if any(registry.EMBEDDED_FACT_VECTORS in registry.get(m).needs for m in methods):
            # Through the conversation's vector cache: the facts the build embedded alone are hits, and
            # the next evaluation of this memory embeds none of them again.
            vectors = ConversationCache(store, cid)
            cached = cached_embedder(vectors, config.extraction.embedder)
            index.embedded_fact_vectors = cached.encode(
                [fact_text(*r) for r in index.facts.select(Facts.subject, Facts.relation, Facts.object).iter_rows()])
            save_vectors(vectors, cached)
        session = LlmSession(config.llm, store, cid) if config.llm.enabled else None
        qa_items: list[QaItem] = []
        for q in questions.iter_rows(named=True):
            if run.benchmark == "longmemeval" and is_abstention(q[Questions.question_id]):
                excluded_abstention += 1
                continue
            date = q[Questions.question_date] or latest
            _, vector_s = _timed(lambda: question_embedder.encode([q[Questions.question]]))
            facts = (session.query_facts(q[Questions.question], date) if session else None) if read_question else []
            # Whether it asks for several things: tagged once, charged to the methods that use it.
            several, form_s = _timed(lambda: form_of(q[Questions.question], config.retrieval) if any(form_read.values()) else False)
            query, encode_s = _timed(lambda: memory.encode(cid, q[Questions.question], date, facts=facts, several=several))
            # What a method that reads no facts pays: the question's vectors (with its form without the speakers' names).
            vectors_s = _timed(lambda: memory.encode(cid, q[Questions.question], date, facts=[], several=False))[1] \
                if read_question else encode_s
            for name, rank in methods.items():
                result, rank_s = _timed(lambda: rank(index, query))
                ranking = ids(result)
                latencies[name].append(rank_s + {"none": 0.0, "vector": vector_s, "vectors": vectors_s, "full": encode_s}[encoding[name]]
                                       + (form_s if form_read[name] else 0.0))
                if name not in traced and len(latencies[name]) == TRACE_QUERIES:
                    traced[name] = _trace_peak(rank, index, query)
                refs = [ref_of[p] for p in ranking]
                if session and name in ev.answer_methods and q[Questions.answer]:
                    # Each method answers from its own context: SEEM's with its frames and seed facts.
                    context = build_context(index, result, ev.answer_budget).text
                    qa_items.append(QaItem(name, q[Questions.question_id], q[Questions.question], date, q[Questions.answer], context))
                if run.benchmark == "locomo":
                    gold = normalise_locomo_evidence(q[Questions.evidence], set(ref_of.values()))
                    locomo_rows[name].append(LocomoQuestion(
                        locomo_category(q[Questions.category]),
                        score_locomo(gold, refs, ks, {b: [ref_of[p] for p in build_context(index, result, b).passage_ids] for b in budgets}),
                        cid,
                    ))
                else:
                    _score_lme(lme_rows[name], q, refs, [speaker_of[p] for p in ranking], ref_of)
        if session and qa_items:
            qa_results.extend(answer_and_judge(session, qa_items))
        if session:
            qa_records.extend(session.records)
        memory.unload(cid)
    query_s = time.perf_counter() - query_started
    timing = _timing(builds, build_s, query_s, latencies, traced, all_passage_texts, embedder)
    results = {
        "benchmark": run.benchmark,
        "data": str(run.data),
        "store": store,
        "config": {
            "methods": list(methods), "extractor": f"{extractor.name} v{extractor.version}",
            "embedder": embedder.name, "ks": ks, "budgets_tokens": budgets,
            "granularities": granularities, "corpus": ev.corpus if run.benchmark == "longmemeval" else "all",
            "llm": config.llm.describe() if config.llm.enabled else None,
            "settings": config.model_dump(mode="json"),
            "settings_sources": dict(sorted(resolved.sources.items())),
        },
        "versions": _versions(),
        "conversations": len(builds),
        "passages": sum(b["passages"] for b in builds.values()),
        "methods": {},
        "timing": timing,
        "seconds_total": time.perf_counter() - started,
    }
    if run.benchmark == "locomo":
        results["questions"] = len(next(iter(locomo_rows.values()), []))
        results["methods"] = {m: summarise_locomo(rows) for m, rows in locomo_rows.items()}
        results["differences"] = differences({m: locomo_columns(rows) for m, rows in locomo_rows.items()},
                                             [q.conversation for q in next(iter(locomo_rows.values()), [])])
    else:
        results["abstention_questions_excluded"] = excluded_abstention
        results["excluded_turns"] = sum(b.get("excluded_turns", 0) for b in builds.values())
        results["methods"] = {m: {g: summarise_longmemeval(rows) for g, rows in per.items()} for m, per in lme_rows.items()}
        results["questions"] = next((r["questions"] for per in results["methods"].values() for r in per.values() if r), 0)
        results["differences"] = differences({m: longmemeval_columns(per) for m, per in lme_rows.items()})
    if config.llm.enabled:
        results["qa"] = {
            "budget_tokens": ev.answer_budget,
            "methods": summarise_qa(qa_results, qa_records),
            "model_calls": sum(r.calls for r in qa_records),
            "by_prompt": {p: {"calls": sum(r.calls for r in qa_records if r.prompt == p),
                              "failed": sum(r.status != "ok" for r in qa_records if r.prompt == p)}
                          for p in sorted({r.prompt for r in qa_records})},
        }
    from seem_dagster.evaluation.report import write_report

    return write_report(results, out)


def _score_lme(rows: dict[str, list], q: dict, refs: list[str], speakers: list[str], ref_of: dict) -> None:
    qtype = q[Questions.category] or "none"
    for granularity in ("turn", "session"):
        if granularity in rows:
            rows[granularity].append((qtype, score_lme_question(granularity, q, refs, speakers, ref_of.values())))


def score_lme_question(granularity: str, q: dict, refs: list[str], speakers: list[str], corpus_refs) -> dict[str, float]:
    """One LongMemEval question's scores of a ranking (``refs``, with their ``speakers``): at the turn
    level over the user turns, at the session level over the haystack's sessions (``corpus_refs``)."""
    gold_turns = set(q[Questions.evidence])
    if granularity == "turn":
        user_refs = [r for r, s in zip(refs, speakers) if s == "user"]
        return score_longmemeval(user_refs, gold_turns, len(user_refs))
    gold = longmemeval_session_gold(q[Questions.evidence_sessions], {session_of(r) for r in gold_turns})
    sessions = {session_of(r) for r in corpus_refs}
    return score_longmemeval([session_of(r) for r in refs], gold, len(sessions))


def _trace_peak(rank, index, query) -> float:
    tracemalloc.start()
    try:
        rank(index, query)
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def _timing(builds, build_s, query_s, latencies, traced, texts, embedder) -> dict:
    timed = [b for b in builds.values() if b["timed"]]  # the memories built outside `seem eval` have no timings
    passages = sum(b["passages"] for b in timed)
    stages: dict[str, float] = {}
    for b in timed:
        for step, seconds in b.get("stage_seconds", {}).items():
            stages[step] = stages.get(step, 0.0) + seconds  # the checks run inside their tables' steps
    per_1k = {step: seconds / passages * 1000 for step, seconds in sorted(stages.items())} if passages else {}
    seem_build_per_1k = sum(per_1k.values()) or None
    # The baselines' builds, measured now in this process: BM25 indexing and plain dense embedding.
    _, bm25_s = _timed(lambda: Bm25(texts))
    sample = texts[:DENSE_BUILD_SAMPLE]
    _, dense_s = _timed(lambda: embedder.encode(sample))
    baseline_build = {
        registry.BM25: bm25_s / max(1, len(texts)) * 1000,
        registry.DENSE: dense_s / max(1, len(sample)) * 1000,
    }
    query = {m: {**_percentiles(v), "queries": len(v)} for m, v in latencies.items()}
    for figures in query.values():
        for base in registry.LATENCY_BASELINES:
            ref = query.get(base, {}).get("p50_ms")
            figures[f"p50_vs_{base}"] = figures["p50_ms"] / ref if ref and figures["p50_ms"] is not None else None
    return {
        "build_seconds_this_run": build_s,
        "conversations_built_this_run": sum(1 for b in builds.values() if not b["cached"]),
        "conversations_reused": sum(1 for b in builds.values() if b["cached"]),
        "conversations_untimed": len(builds) - len(timed),
        "build_seconds_per_1k_passages": {"seem_stages": per_1k, "seem_total": seem_build_per_1k, **baseline_build},
        "build_ratio": {
            f"seem_vs_{base}": seem_build_per_1k / baseline_build[base] if seem_build_per_1k and baseline_build[base] else None
            for base in (registry.BM25, registry.DENSE)
        },
        "query_seconds_total": query_s,
        "query_latency": query,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "query_peak_traced_mb": traced,
    }
