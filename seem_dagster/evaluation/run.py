"""`seem eval`: build every conversation's memory once (through Dagster), rank with every method, score.

Memories live in a store kept between runs: a conversation whose input, ingest options and
extraction/embedding models are unchanged since its last evaluated build is reused, and that
build's stage timings are carried over (marked ``cached``).
"""

from __future__ import annotations

import json
import platform
import resource
import statistics
import time
import tracemalloc
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path

from seem_dagster import backends
from seem_dagster.evaluation.methods import METHODS, rankers
from seem_dagster.evaluation.metrics import is_abstention, longmemeval_session_gold, normalise_locomo_evidence
from seem_dagster.evaluation.scoring import (
    LME_KS,
    LocomoQuestion,
    locomo_category,
    score_locomo,
    score_longmemeval,
    summarise_locomo,
    summarise_longmemeval,
)
from seem_dagster.evaluation.qa import QaItem, answer_and_judge, summarise_qa, uniform_context
from seem_dagster.ingest import IngestOptions
from seem_dagster.llm.session import LlmSession
from seem_dagster.llm.settings import LlmSettings
from seem_dagster.ingest.longmemeval import session_of
from seem_dagster.retrieval.context import words
from seem_dagster.retrieval.lexical import Bm25
from seem_dagster.retrieval.load import TABLES, load_index
from seem_dagster.retrieval.query import encode_query
from seem_dagster.retrieval.search import RetrievalConfig
from seem_dagster.schemas import Passages, Questions
from seem_dagster.store.snapshot import SnapshotError, read_snapshot, read_table, table_path

BENCHMARKS = ("locomo", "longmemeval")
GRANULARITIES = ("session", "turn")
TRACE_QUERIES = 20  # queries per method traced for memory (tracemalloc slows them; not timed)
DENSE_BUILD_SAMPLE = 500  # passages embedded uncached to time the dense baseline's build
# The build job's op steps; every other step is a blocking asset check.
ASSET_STEPS = ("ingest_conversation", "extract_frames", "episodes", "build_graph", "retrieval_index")
PACKAGES = ("seem-dagster", "dagster", "polars", "igraph", "spacy", "torch", "sentence-transformers", "bm25s")


@dataclass
class EvalSettings:
    benchmark: str
    data: str
    out: str
    methods: list[str] = field(default_factory=lambda: list(METHODS))
    store: str | None = None
    conversations: list[str] | None = None
    progress: bool = True
    ks: list[int] = field(default_factory=lambda: [5, 10, 25, 50])
    budgets: list[int] = field(default_factory=lambda: [500, 1000, 2000])
    granularities: list[str] = field(default_factory=lambda: list(GRANULARITIES))
    corpus: str = "user"
    # With a language model: memories are built with it, and these methods' contexts are answered and judged.
    llm: LlmSettings | None = None
    answer_methods: list[str] = field(default_factory=lambda: ["seem", "hybrid"])
    answer_budget: int = 1000

    def check(self) -> None:
        if self.benchmark not in BENCHMARKS:
            raise ValueError(f"unknown benchmark {self.benchmark!r}; choose from {', '.join(BENCHMARKS)}")
        rankers(RetrievalConfig(), self.methods)  # raises on an unknown method
        if self.llm is not None and self.llm.enabled and not set(self.answer_methods) <= set(self.methods):
            raise ValueError(f"--answer-methods {','.join(self.answer_methods)}: each must be one of the evaluated methods")
        bad = [g for g in self.granularities if g not in GRANULARITIES]
        if self.benchmark == "longmemeval" and (bad or not self.granularities):
            raise ValueError(f"--granularity {','.join(self.granularities)!r}: choose from {', '.join(GRANULARITIES)}")

    def ingest_options(self) -> IngestOptions:
        if self.benchmark == "longmemeval":
            # One public haystack turn is empty; it is skipped and reported, as `seem build --allow-empty-turns`.
            return IngestOptions(allow_empty_turns=True, speakers=("user",) if self.corpus == "user" else None)
        return IngestOptions()


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


def _llm_on(settings: EvalSettings) -> bool:
    return settings.llm is not None and settings.llm.enabled


def _signature(settings: EvalSettings, fingerprint: str) -> dict:
    ex, em = backends.extractor(), backends.embedder()
    extractor = f"{ex.name} v{ex.version}"
    if _llm_on(settings):
        from seem_dagster.llm.prompts import passage

        extractor = f"llm:{settings.llm.backend}:{settings.llm.model} passage v{passage.PROMPT.version}"
    return json.loads(json.dumps({  # as it reads back from the build record (tuples become lists)
        "fingerprint": fingerprint,
        "ingest": asdict(settings.ingest_options()),
        "extractor": extractor,
        "embedder": em.name,
        "package": _versions()["seem-dagster"],
    }))


def _build_record_path(store: str, conversation_id: str) -> Path:
    from seem_dagster.store.keys import file_stem

    return Path(store) / "_eval" / f"{file_stem(conversation_id)}.json"


def build_memories(settings: EvalSettings, store: str) -> dict:
    """Build (or reuse) every conversation's memory; per-stage seconds per conversation."""
    from seem_dagster.definitions import build_defs
    from seem_dagster.defs.runner import build_conversations
    from seem_dagster.registry import register_file

    options = settings.ingest_options()
    registered = register_file(store, settings.data, settings.benchmark, options, conversations=settings.conversations)
    builds: dict[str, dict] = {}
    todo = []
    for reg in registered:
        signature = _signature(settings, reg.fingerprint)
        record = _build_record_path(store, reg.conversation_id)
        previous = json.loads(record.read_text()) if record.exists() else None
        if previous and previous["signature"] == signature:
            try:
                read_snapshot(store, reg.conversation_id, TABLES)
                builds[reg.conversation_id] = {**previous, "cached": True}
                continue
            except (SnapshotError, FileNotFoundError):
                pass
        todo.append((reg, signature, record))
    if todo:
        llm = None
        if _llm_on(settings):
            from seem_dagster.defs.resources import LlmResource

            llm = LlmResource.from_settings(settings.llm)
        defs = build_defs(store_root=store, llm=llm, max_turn_chars=options.max_turn_chars, allow_empty_turns=options.allow_empty_turns)
        outcomes = build_conversations(defs, [reg.conversation_id for reg, _, _ in todo], progress=settings.progress)
        failed = [o for o in outcomes if not o.success]
        if failed:
            raise RuntimeError(f"{len(failed)} memory builds failed; {failed[0].conversation_id}: {failed[0].error}")
        for (reg, signature, record), outcome in zip(todo, outcomes):
            entry = {
                "signature": signature, "passages": reg.passages, "excluded_turns": reg.excluded,
                "skipped_turns": list(reg.skipped), "stage_seconds": outcome.step_seconds or {},
            }
            record.parent.mkdir(parents=True, exist_ok=True)
            record.write_text(json.dumps(entry, indent=2))
            builds[reg.conversation_id] = {**entry, "cached": False}
    return {reg.conversation_id: builds[reg.conversation_id] for reg in registered}


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


# Which query encoding a method needs before it ranks: none, the question's vector, or everything.
_ENCODING = {"bm25": "none", "dense": "vector", "hybrid": "vector"}


def run_evaluation(settings: EvalSettings) -> str:
    settings.check()
    out = Path(settings.out)
    out.mkdir(parents=True, exist_ok=True)
    store = settings.store or str(out / "store")
    started = time.perf_counter()
    builds, build_s = _timed(lambda: build_memories(settings, store))
    extractor, embedder = backends.extractor(), backends.embedder()
    config = RetrievalConfig()
    methods = rankers(config, settings.methods)
    latencies: dict[str, list[float]] = {m: [] for m in methods}
    traced: dict[str, float] = {}
    locomo_rows: dict[str, list[LocomoQuestion]] = {m: [] for m in methods}
    lme_rows: dict[str, dict[str, list]] = {m: {g: [] for g in settings.granularities} for m in methods}
    excluded_abstention = 0
    qa_results: list = []
    qa_records: list = []
    all_passage_texts: list[str] = []
    query_started = time.perf_counter()
    for cid in _progress(list(builds), settings.progress, desc="querying", unit="conversation"):
        index = load_index(store, cid)
        questions = read_table(table_path(store, "questions", cid))
        passages = index.passages
        ref_of = dict(zip(passages[Passages.passage_id].to_list(), passages[Passages.source_ref].to_list()))
        speaker_of = dict(zip(passages[Passages.passage_id].to_list(), passages[Passages.speaker].to_list()))
        words_of = {ref_of[p]: words(t) + 3 for p, t in zip(passages[Passages.passage_id].to_list(), passages[Passages.text].to_list())}
        all_passage_texts.extend(passages[Passages.text].to_list())
        latest = passages[Passages.timestamp].max()
        index.lexical  # built once per conversation, outside the query timings
        session = LlmSession(settings.llm, store, cid) if _llm_on(settings) else None
        rows_by_id = {r[Passages.passage_id]: r for r in passages.iter_rows(named=True)} if session else {}
        qa_items: list[QaItem] = []
        for q in questions.iter_rows(named=True):
            if settings.benchmark == "longmemeval" and is_abstention(q[Questions.question_id]):
                excluded_abstention += 1
                continue
            date = q[Questions.question_date] or latest
            _, vector_s = _timed(lambda: embedder.encode([q[Questions.question]]))
            facts = session.query_facts(q[Questions.question], date) if session else None
            query, encode_s = _timed(lambda: encode_query(q[Questions.question], date, extractor, embedder, cid, facts=facts))
            for name, rank in methods.items():
                ranking, rank_s = _timed(lambda: rank(index, query))
                needs = _ENCODING.get(name, "full")
                latencies[name].append(rank_s + {"none": 0.0, "vector": vector_s, "full": encode_s}[needs])
                if name not in traced and len(latencies[name]) == TRACE_QUERIES:
                    traced[name] = _trace_peak(rank, index, query)
                refs = [ref_of[p] for p in ranking]
                if session and name in settings.answer_methods and q[Questions.answer]:
                    context = uniform_context(ranking, rows_by_id, index.position, settings.answer_budget)
                    qa_items.append(QaItem(name, q[Questions.question_id], q[Questions.question], date, q[Questions.answer], context))
                if settings.benchmark == "locomo":
                    gold = normalise_locomo_evidence(q[Questions.evidence], set(ref_of.values()))
                    locomo_rows[name].append(LocomoQuestion(
                        locomo_category(q[Questions.category]),
                        score_locomo(gold, refs, words_of.get, settings.ks, settings.budgets),
                    ))
                else:
                    _score_lme(lme_rows[name], q, refs, [speaker_of[p] for p in ranking], ref_of)
        if session and qa_items:
            qa_results.extend(answer_and_judge(session, qa_items))
        if session:
            qa_records.extend(session.records)
    query_s = time.perf_counter() - query_started
    timing = _timing(builds, build_s, query_s, latencies, traced, all_passage_texts, embedder)
    results = {
        "benchmark": settings.benchmark,
        "data": str(settings.data),
        "store": store,
        "config": {
            "methods": list(methods), "retrieval": asdict(config), "extractor": f"{extractor.name} v{extractor.version}",
            "embedder": embedder.name, "ks": settings.ks, "budgets_words": settings.budgets,
            "granularities": settings.granularities, "corpus": settings.corpus if settings.benchmark == "longmemeval" else "all",
            "llm": settings.llm.describe() if _llm_on(settings) else None,
        },
        "versions": _versions(),
        "conversations": len(builds),
        "passages": sum(b["passages"] for b in builds.values()),
        "methods": {},
        "timing": timing,
        "seconds_total": time.perf_counter() - started,
    }
    if settings.benchmark == "locomo":
        results["questions"] = len(next(iter(locomo_rows.values()), []))
        results["methods"] = {m: summarise_locomo(rows) for m, rows in locomo_rows.items()}
    else:
        results["abstention_questions_excluded"] = excluded_abstention
        results["excluded_turns"] = sum(b.get("excluded_turns", 0) for b in builds.values())
        results["methods"] = {m: {g: summarise_longmemeval(rows) for g, rows in per.items()} for m, per in lme_rows.items()}
        results["questions"] = next((r["questions"] for per in results["methods"].values() for r in per.values() if r), 0)
    if _llm_on(settings):
        results["qa"] = {
            "budget_words": settings.answer_budget,
            "methods": summarise_qa(qa_results, qa_records),
            "model_calls": sum(r.calls for r in qa_records),
            "by_prompt": {p: {"calls": sum(r.calls for r in qa_records if r.prompt == p),
                              "failed": sum(r.status != "ok" for r in qa_records if r.prompt == p)}
                          for p in sorted({r.prompt for r in qa_records})},
        }
    from seem_dagster.evaluation.report import write_report

    return write_report(results, out)


def _score_lme(rows: dict[str, list], q: dict, refs: list[str], speakers: list[str], ref_of: dict) -> None:
    gold_turns = set(q[Questions.evidence])
    corpus_refs = list(ref_of.values())
    qtype = q[Questions.category] or "none"
    if "turn" in rows:
        user_refs = [r for r, s in zip(refs, speakers) if s == "user"]
        n_user = len(user_refs)
        rows["turn"].append((qtype, score_longmemeval(user_refs, gold_turns, n_user)))
    if "session" in rows:
        gold = longmemeval_session_gold(q[Questions.evidence_sessions], {session_of(r) for r in gold_turns})
        sessions = {session_of(r) for r in corpus_refs}
        rows["session"].append((qtype, score_longmemeval([session_of(r) for r in refs], gold, len(sessions))))


def _trace_peak(rank, index, query) -> float:
    tracemalloc.start()
    try:
        rank(index, query)
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def _timing(builds, build_s, query_s, latencies, traced, texts, embedder) -> dict:
    passages = sum(b["passages"] for b in builds.values())
    stages: dict[str, float] = {}
    for b in builds.values():
        for step, seconds in b.get("stage_seconds", {}).items():
            stage = step if step in ASSET_STEPS else "asset checks"
            stages[stage] = stages.get(stage, 0.0) + seconds
    per_1k = {step: seconds / passages * 1000 for step, seconds in sorted(stages.items())} if passages else {}
    seem_build_per_1k = sum(per_1k.values()) or None
    # The baselines' builds, measured now in this process: BM25 indexing and plain dense embedding.
    _, bm25_s = _timed(lambda: Bm25(texts))
    sample = texts[:DENSE_BUILD_SAMPLE]
    _, dense_s = _timed(lambda: embedder.encode(sample))
    baseline_build = {
        "bm25": bm25_s / max(1, len(texts)) * 1000,
        "dense": dense_s / max(1, len(sample)) * 1000,
    }
    query = {m: {**_percentiles(v), "queries": len(v)} for m, v in latencies.items()}
    for m, figures in query.items():
        for base in ("bm25", "dense"):
            ref = query.get(base, {}).get("p50_ms")
            figures[f"p50_vs_{base}"] = figures["p50_ms"] / ref if ref and figures["p50_ms"] is not None else None
    return {
        "build_seconds_this_run": build_s,
        "conversations_built_this_run": sum(1 for b in builds.values() if not b["cached"]),
        "conversations_reused": sum(1 for b in builds.values() if b["cached"]),
        "build_seconds_per_1k_passages": {"seem_stages": per_1k, "seem_total": seem_build_per_1k, **baseline_build},
        "build_ratio": {
            "seem_vs_bm25": seem_build_per_1k / baseline_build["bm25"] if seem_build_per_1k and baseline_build["bm25"] else None,
            "seem_vs_dense": seem_build_per_1k / baseline_build["dense"] if seem_build_per_1k and baseline_build["dense"] else None,
        },
        "query_seconds_total": query_s,
        "query_latency": query,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "query_peak_traced_mb": traced,
    }
