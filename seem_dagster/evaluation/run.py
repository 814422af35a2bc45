"""`seem eval`: build every conversation's memory once (through Dagster), rank with every method, score.

The parts, each its own module: build reuse (``evaluation.builds``), what the methods need prepared
(``evaluation.prepared``: the reranker's held-out folds, the facts embedded alone), the timed loop
(``evaluation.loop``), scoring (``evaluation.scoring``), the speed figures (``evaluation.timing``) and
the results (``results`` here, written by ``evaluation.report``). Every part goes through ``Memory``,
the path users run.
"""

from __future__ import annotations

import platform
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from seem_dagster import backends
from seem_dagster.config import Layer, Resolved, SeemConfig, resolve_standard
from seem_dagster.evaluation.ablation import differences, locomo_columns, longmemeval_columns
from seem_dagster.evaluation.builds import build_memories
from seem_dagster.evaluation.loop import Collected, QueryLoop
from seem_dagster.evaluation.methods import method_config, rankers
from seem_dagster.evaluation.prepared import Prepared
from seem_dagster.evaluation.qa import summarise_qa
from seem_dagster.evaluation.scoring import LME_KS, summarise_locomo, summarise_longmemeval
from seem_dagster.evaluation.timing import timed, timing
from seem_dagster.memory import Memory

BENCHMARKS = ("locomo", "longmemeval")
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


def run_evaluation(run: EvalRun, resolved: Resolved | None = None) -> str:
    """Build (or reuse), rank, score and write one benchmark's evaluation; the results folder."""
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
    builds, build_s = timed(lambda: build_memories(memory, run.data, run.benchmark, run.conversations, run.progress))
    prepared = Prepared.for_methods(ev.methods, any(method_config(config.retrieval, m).rerank for m in ev.methods))
    methods = rankers(config.retrieval, ev.methods, config.properties, prepared)
    locomo = run.benchmark == "locomo"
    loop = QueryLoop(memory, run.benchmark, config, methods, prepared, ks=list(ev.ks) if locomo else list(LME_KS),
                     budgets=list(ev.budgets) if locomo else [], granularities=list(dict.fromkeys(ev.granularities)))
    query_started = time.perf_counter()
    for cid in _progress(list(builds), run.progress, desc="querying", unit="conversation"):
        loop.conversation(cid)
    query_s = time.perf_counter() - query_started
    embedder = backends.embedder(config.extraction.embedder)
    c = loop.collected
    results = {
        **results_header(run, store, resolved, list(methods), loop, builds),
        **scores(run.benchmark, c, builds),
        "timing": timing(builds, build_s, query_s, c.latencies, c.traced, c.passage_texts, embedder),
    }
    if config.llm.enabled:
        results["qa"] = qa_figures(c, ev.answer_budget)
    results["seconds_total"] = time.perf_counter() - started
    from seem_dagster.evaluation.report import write_report

    return write_report(results, out)


def results_header(run: EvalRun, store: str, resolved: Resolved, methods: list[str], loop: QueryLoop, builds: dict) -> dict:
    """What was evaluated: the data, the store, every setting and where it came from, the versions."""
    config = resolved.config
    extractor, embedder = backends.extractor(config.extraction.extractor), backends.embedder(config.extraction.embedder)
    return {
        "benchmark": run.benchmark,
        "data": str(run.data),
        "store": store,
        "config": {
            "methods": methods, "extractor": f"{extractor.name} v{extractor.version}",
            "embedder": embedder.name, "ks": loop.ks, "budgets_tokens": loop.budgets,
            "granularities": loop.granularities, "corpus": config.evaluation.corpus if run.benchmark == "longmemeval" else "all",
            "llm": config.llm.describe() if config.llm.enabled else None,
            "settings": config.model_dump(mode="json"),
            "settings_sources": dict(sorted(resolved.sources.items())),
        },
        "versions": _versions(),
        "conversations": len(builds),
        "passages": sum(b["passages"] for b in builds.values()),
    }


def scores(benchmark: str, c: Collected, builds: dict) -> dict:
    """Each method's figures and the ablation's paired differences."""
    if benchmark == "locomo":
        rows = c.locomo
        return {
            "questions": len(next(iter(rows.values()), [])),
            "methods": {m: summarise_locomo(r) for m, r in rows.items()},
            "differences": differences({m: locomo_columns(r) for m, r in rows.items()}, [q.conversation for q in next(iter(rows.values()), [])]),
        }
    methods = {m: {g: summarise_longmemeval(r) for g, r in per.items()} for m, per in c.longmemeval.items()}
    return {
        "abstention_questions_excluded": c.excluded_abstention,
        "excluded_turns": sum(b.get("excluded_turns", 0) for b in builds.values()),
        "methods": methods,
        "questions": next((r["questions"] for per in methods.values() for r in per.values() if r), 0),
        "differences": differences({m: longmemeval_columns(per) for m, per in c.longmemeval.items()}),
    }


def qa_figures(c: Collected, budget: int) -> dict:
    """Question answering's figures, when a model answered: per method, and the model's calls."""
    records = c.qa_records
    return {
        "budget_tokens": budget,
        "methods": summarise_qa(c.qa_results, records),
        "model_calls": sum(r.calls for r in records),
        "by_prompt": {p: {"calls": sum(r.calls for r in records if r.prompt == p),
                          "failed": sum(r.status != "ok" for r in records if r.prompt == p)}
                      for p in sorted({r.prompt for r in records})},
    }
