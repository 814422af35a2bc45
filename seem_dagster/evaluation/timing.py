"""The evaluation's speed figures: the builds' stage seconds per 1,000 passages beside the baselines'
builds timed in the same process, and each method's query latency beside the registry's latency
baselines."""

from __future__ import annotations

import resource
import statistics
import time
import tracemalloc

from seem_dagster import methods as registry
from seem_dagster.retrieval.lexical import Bm25

TRACE_QUERIES = 20  # queries per method traced for memory (tracemalloc slows them; not timed)
DENSE_BUILD_SAMPLE = 500  # passages embedded uncached to time the dense baseline's build


def timed(fn):
    """``fn()`` and the seconds it took."""
    started = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - started


def percentiles(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"p50_ms": None, "p95_ms": None}
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]
    return {"p50_ms": statistics.median(ordered) * 1000, "p95_ms": p95 * 1000}


def trace_peak(rank, index, query) -> float:
    """The peak MiB Python allocates while ``rank`` ranks ``query`` once (traced, so not timed)."""
    tracemalloc.start()
    try:
        rank(index, query)
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def timing(builds: dict, build_s: float, query_s: float, latencies: dict[str, list[float]], traced: dict[str, float],
           texts: list[str], embedder) -> dict:
    """results.json's ``timing``: ``builds`` as ``evaluation.builds.build_memories`` returns them,
    ``latencies`` each method's seconds per query, ``texts`` every passage (the baselines' builds,
    timed now with ``embedder``)."""
    timed_builds = [b for b in builds.values() if b["timed"]]  # the memories built outside `seem eval` have no timings
    passages = sum(b["passages"] for b in timed_builds)
    stages: dict[str, float] = {}
    for b in timed_builds:
        for step, seconds in b.get("stage_seconds", {}).items():
            stages[step] = stages.get(step, 0.0) + seconds  # the checks run inside their tables' steps
    per_1k = {step: seconds / passages * 1000 for step, seconds in sorted(stages.items())} if passages else {}
    seem_build_per_1k = sum(per_1k.values()) or None
    _, bm25_s = timed(lambda: Bm25(texts))
    sample = texts[:DENSE_BUILD_SAMPLE]
    _, dense_s = timed(lambda: embedder.encode(sample))
    baseline_build = {
        registry.BM25: bm25_s / max(1, len(texts)) * 1000,
        registry.DENSE: dense_s / max(1, len(sample)) * 1000,
    }
    query = {m: {**percentiles(v), "queries": len(v)} for m, v in latencies.items()}
    for figures in query.values():
        for base in registry.LATENCY_BASELINES:
            ref = query.get(base, {}).get("p50_ms")
            figures[f"p50_vs_{base}"] = figures["p50_ms"] / ref if ref and figures["p50_ms"] is not None else None
    return {
        "build_seconds_this_run": build_s,
        "conversations_built_this_run": sum(1 for b in builds.values() if not b["cached"]),
        "conversations_reused": sum(1 for b in builds.values() if b["cached"]),
        "conversations_untimed": len(builds) - len(timed_builds),
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
