"""Build throughput of the embedded default through Dagster, against plain dense embedding and BM25, in one process.

    .venv/bin/python benchmarks/build_throughput.py [--data PATH] [-n 2] [--profile N]

Builds the first ``n`` LoCoMo dev conversations into a fresh store (one Dagster run per
conversation, as `seem build` does) and prints, per 1,000 turns: each Dagster step's seconds (the
run's own step timing), the parts the steps report in their metadata (extraction, frame embedding,
fusion, synonyms, index embedding), Dagster's own overhead (run wall time minus its steps) and the
whole build; then, in the same process, the plain MiniLM embedding of the same passages
(``speaker: text``, no cache) and BM25 indexing of them, with the build's ratio to each. The models
are loaded and warmed first, so neither side pays for loading them. Peak RSS is the process's.

``--profile N`` also runs the build under cProfile and prints the N most expensive functions by
cumulative time (slower; the figures above come from the run without it).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import resource
import tempfile
import time
from pathlib import Path

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo_dev7.json"
# The step-reported parts: (step, metadata key) -> label.
PARTS = {
    ("event_frames", "seconds"): "  extraction (spaCy + rules + properties)",
    ("episodes", "embed_seconds"): "  frame summaries embedded",
    ("episodes", "fuse_seconds"): "  fusion",
    ("graph_edges", "synonym_seconds"): "  synonym edges",
    ("retrieval_index", "seconds"): "  passages + facts embedded",
}


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def conversation_ids(path: Path, n: int) -> list[str]:
    return [c["sample_id"] for c in json.loads(path.read_text())[:n]]


def step_metadata(instance, run_id: str) -> dict[tuple[str, str], float]:
    """The float metadata of the run's materializations, by (asset, key)."""
    out: dict[tuple[str, str], float] = {}
    for entry in instance.all_logs(run_id):
        event = entry.dagster_event
        if event is None or event.event_type_value != "ASSET_MATERIALIZATION":
            continue
        mat = event.event_specific_data.materialization
        for key, value in mat.metadata.items():
            if isinstance(getattr(value, "value", None), float):
                out[(mat.asset_key.to_user_string(), key)] = value.value
    return out


def build(store: Path, data: Path, ids: list[str]) -> dict:
    """Register and build ``ids`` through Dagster (one run each); seconds of everything."""
    from dagster import DagsterInstance

    from seem_dagster.config import Layer, resolve
    from seem_dagster.defs.assemble import build_defs
    from seem_dagster.defs.runner import build_conversations
    from seem_dagster.registry import register_file

    started = time.perf_counter()
    registered = register_file(store, str(data), "locomo", conversations=ids)
    defs = build_defs(resolve([Layer("benchmark", {"store.root": str(store)})]))
    instance = DagsterInstance.ephemeral()
    runs_started = time.perf_counter()
    outcomes = build_conversations(defs, ids, instance=instance)
    done = time.perf_counter()
    for outcome in outcomes:
        assert outcome.success, f"{outcome.conversation_id}: {outcome.error}"
    steps: dict[str, float] = {}
    parts: dict[tuple[str, str], float] = {}
    for outcome in outcomes:
        for step, seconds in (outcome.step_seconds or {}).items():
            steps[step] = steps.get(step, 0.0) + seconds
        for key, value in step_metadata(instance, outcome.run_id).items():
            parts[key] = parts.get(key, 0.0) + value
    return {"total": done - started, "setup": runs_started - started, "runs": done - runs_started, "steps": steps,
            "parts": parts, "turns": sum(r.passages for r in registered)}


def passage_texts(data: Path, ids: list[str]) -> list[str]:
    from seem_dagster.ingest import load_input
    from seem_dagster.retrieval.index import passage_text
    from seem_dagster.schemas import Passages

    convs = load_input(data, "locomo", conversations=ids)
    return [passage_text(s, t) for c in convs for s, t in zip(c.passages[Passages.speaker].to_list(), c.passages[Passages.text].to_list())]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("-n", type=int, default=2, help="conversations, from the first (default 2)")
    parser.add_argument("--profile", type=int, default=0, metavar="N", help="also profile the build; print the top N functions")
    args = parser.parse_args()
    ids = conversation_ids(args.data, args.n)
    work = Path(tempfile.mkdtemp(prefix="seem-throughput-"))

    from seem_dagster import backends
    from seem_dagster.retrieval.lexical import Bm25

    texts = passage_texts(args.data, ids)
    extractor, embedder = backends.extractor(), backends.embedder()
    # Load and warm the models (and Dagster) outside every timing: a throw-away build of the
    # smallest conversation's first turns would do too, but the models are what costs seconds.
    extractor.nlp.pipe(["warm up"])
    list(extractor.nlp.pipe(texts[:64]))
    embedder.encode(texts[:64])
    rss_before = peak_rss_mb()

    figures = build(work / "store", args.data, ids)
    rss_build = peak_rss_mb()
    started = time.perf_counter()
    embedder.encode(texts)
    dense_s = time.perf_counter() - started
    started = time.perf_counter()
    Bm25(texts)
    bm25_s = time.perf_counter() - started

    turns = figures["turns"]
    assert turns == len(texts), (turns, len(texts))
    per_k = 1000 / turns
    print(f"{args.data.name}: {len(ids)} conversations ({', '.join(ids)}), {turns} turns")
    print(f"{'':<44}{'s':>9}{'s/1k turns':>12}{'turns/s':>10}")

    def row(label: str, seconds: float) -> None:
        rate = f"{turns / seconds:>10.1f}" if seconds > 0 else f"{'':>10}"
        print(f"{label:<44}{seconds:>9.2f}{seconds * per_k:>12.2f}{rate}")

    row("whole build (register + runs)", figures["total"])
    row("  register + definitions", figures["setup"])
    steps = figures["steps"]
    for step, seconds in sorted(steps.items(), key=lambda kv: -kv[1]):
        if step.startswith(("ingest_conversation", "extract_frames", "episodes", "build_graph", "retrieval_index", "memory")):
            row(f"  step {step}", seconds)
    checks = sum(s for k, s in steps.items() if not k.startswith(("ingest_conversation", "extract_frames", "episodes",
                                                                     "build_graph", "retrieval_index", "memory")))
    row("  asset checks (their steps)", checks)
    row("  Dagster overhead (runs - steps)", figures["runs"] - sum(steps.values()))
    print("parts reported by the steps:")
    for key, label in PARTS.items():
        if key in figures["parts"]:
            row(label, figures["parts"][key])
    row("plain MiniLM embedding of the passages", dense_s)
    row("BM25 indexing of the passages", bm25_s)
    print(f"build / dense embedding: {figures['total'] / dense_s:.2f}x (runs only: {figures['runs'] / dense_s:.2f}x); "
          f"build / BM25: {figures['total'] / bm25_s:.0f}x")
    print(f"peak RSS: {rss_before:.0f} MB with the models loaded, {rss_build:.0f} MB after the build, {peak_rss_mb():.0f} MB at the end")

    if args.profile:
        profiler = cProfile.Profile()
        profiler.enable()
        build(work / "profiled", args.data, ids)
        profiler.disable()
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(args.profile)
        print(out.getvalue())


if __name__ == "__main__":
    main()
