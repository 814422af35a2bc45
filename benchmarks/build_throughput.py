"""Build throughput of the embedded default through Dagster, against plain dense embedding and BM25, in one process.

    .venv/bin/python benchmarks/build_throughput.py [--data PATH] [-n 2] [--set KEY=VALUE ...] [--versus KEY=VALUE ...] [--profile N]

Builds the first ``n`` LoCoMo dev conversations into a fresh store (one Dagster run per
conversation, as `seem build` does) and prints, per 1,000 turns: each Dagster step's seconds (the
run's own step timing), the parts the steps report in their metadata (extraction, frame embedding,
fusion, synonyms, index embedding), Dagster's own overhead (run wall time minus its steps) and the
whole build; then, in the same process, the plain MiniLM embedding of the same passages
(``speaker: text``, no cache) and BM25 indexing of them, with the build's ratio to each. The models
are loaded and warmed first, so neither side pays for loading them. Peak RSS is the process's.

``--profile N`` also runs the build under cProfile and prints the N most expensive functions by
cumulative time (slower; the figures above come from the run without it). ``--set`` changes a setting
of the build as `seem build --set` does; ``--versus`` builds a second time with that setting changed
(e.g. ``--versus synonyms.embedder=extraction``), in the same process, and prints both columns.
The dense baseline is timed before and after the builds, and their mean is the reference; a variant
that embeds with another model (``extraction.embedder=minilm-bf16``) is also set against plain
embedding with that model. Each variant builds the bundled sample once first, untimed, so no
variant's figures hold what a process pays once (its embedder's weights, the static name table).
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
SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample_conversation.jsonl"
SAMPLE_ID = "priya-tomas"
# The step-reported parts: (step, metadata key) -> label.
PARTS = {
    ("event_frames", "seconds"): "  extraction (spaCy + rules + properties)",
    ("episodes", "embed_seconds"): "  fusion's vectors embedded (passages or summaries)",
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


def build(store: Path, data: Path, ids: list[str], settings: dict[str, str], fmt: str = "locomo") -> dict:
    """Register and build ``ids`` through Dagster (one run each); seconds of everything."""
    from dagster import DagsterInstance

    from seem_dagster.config import Layer, resolve
    from seem_dagster.defs.assemble import build_defs
    from seem_dagster.defs.runner import build_conversations
    from seem_dagster.registry import register_file

    started = time.perf_counter()
    registered = register_file(store, str(data), fmt, conversations=ids)
    config = resolve([Layer("benchmark", {"store.root": str(store)}), Layer("--set", settings, text=True)])
    defs = build_defs(config)
    instance = DagsterInstance.ephemeral()
    runs_started = time.perf_counter()
    outcomes = build_conversations(defs, ids, instance=instance, config=config)
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


STEPS = ("ingest_conversation", "extract_frames", "episodes", "build_graph", "retrieval_index", "memory")


def rows(figures: dict) -> dict[str, float]:
    """Label -> seconds, in the order printed."""
    out = {"whole build (register + runs)": figures["total"], "  register + definitions": figures["setup"]}
    steps = figures["steps"]
    for step in STEPS:
        out[f"  step {step}"] = sum(s for k, s in steps.items() if k == step)
    out["  Dagster overhead (runs - steps)"] = figures["runs"] - sum(steps.values())
    for key, label in PARTS.items():
        out[label] = figures["parts"].get(key, 0.0)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("-n", type=int, default=2, help="conversations, from the first (default 2)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a setting of the build")
    parser.add_argument("--versus", action="append", default=[], metavar="KEY=VALUE",
                        help="also build with this setting changed, in the same process, and print both")
    parser.add_argument("--profile", type=int, default=0, metavar="N", help="also profile the build; print the top N functions")
    args = parser.parse_args()
    ids = conversation_ids(args.data, args.n)
    settings = dict(item.split("=", 1) for item in args.set)
    variants = {"build": settings}
    if args.versus:
        variants["versus"] = {**settings, **dict(item.split("=", 1) for item in args.versus)}
    work = Path(tempfile.mkdtemp(prefix="seem-throughput-"))

    from seem_dagster import backends
    from seem_dagster.retrieval.lexical import Bm25

    texts = passage_texts(args.data, ids)
    extractor, embedder = backends.extractor(), backends.embedder()
    # Load and warm the models outside every timing: they are what costs seconds to load.
    list(extractor.nlp.pipe(texts[:64]))
    embedder.encode(texts[:64])
    rss_before = peak_rss_mb()

    def dense() -> float:
        started = time.perf_counter()
        embedder.encode(texts)
        return time.perf_counter() - started

    # Each variant first builds the bundled sample once, untimed: what a process pays once (its
    # embedder's weights, the static name table, Dagster's first run) is in no variant's figures.
    for name, values in variants.items():
        build(work / f"warm-{name}", SAMPLE, [SAMPLE_ID], values, "jsonl")
    # The dense baseline before and after the builds (the machine is shared: its load drifts).
    dense_s = [dense()]
    figures = {name: build(work / name, args.data, ids, values) for name, values in variants.items()}
    rss_build = peak_rss_mb()
    dense_s.append(dense())
    started = time.perf_counter()
    Bm25(texts)
    bm25_s = time.perf_counter() - started
    dense_mean = sum(dense_s) / len(dense_s)
    # A variant that embeds with another model (minilm-bf16) is also set against plain embedding with it.
    own_dense = {}
    for name, values in variants.items():
        other = values.get("extraction.embedder", "minilm")
        if other != "minilm":
            started = time.perf_counter()
            backends.embedder(other).encode(texts)
            own_dense[name] = (other, time.perf_counter() - started)

    turns = len(texts)
    assert all(f["turns"] == turns for f in figures.values()), (turns, [f["turns"] for f in figures.values()])
    per_k = 1000 / turns
    print(f"{args.data.name}: {len(ids)} conversations ({', '.join(ids)}), {turns} turns")
    for name, values in variants.items():
        print(f"{name}: {values or 'the defaults'}")
    print(f"{'seconds per 1,000 turns':<44}" + "".join(f"{name:>10}" for name in variants) + f"{'turns/s':>10}")
    table = {name: rows(f) for name, f in figures.items()}
    for label in table["build"]:
        values = [table[name][label] for name in variants]
        if label.startswith("  step") and max(values) < 0.05:
            continue
        rate = turns / values[0] if values[0] > 0 else 0.0
        print(f"{label:<44}" + "".join(f"{v * per_k:>10.2f}" for v in values) + f"{rate:>10.1f}")
    print(f"{'plain MiniLM embedding of the passages':<44}{dense_mean * per_k:>10.2f}{'':>{10 * (len(variants) - 1)}}"
          f"{turns / dense_mean:>10.1f}   (runs before and after the builds: {dense_s[0]:.1f} s, {dense_s[1]:.1f} s)")
    for other, seconds in dict(own_dense.values()).items():
        print(f"{'plain ' + other + ' embedding':<44}{seconds * per_k:>10.2f}{'':>{10 * (len(variants) - 1)}}{turns / seconds:>10.1f}")
    print(f"{'BM25 indexing of the passages':<44}{bm25_s * per_k:>10.2f}{'':>{10 * (len(variants) - 1)}}{turns / bm25_s:>10.1f}")
    for name, f in figures.items():
        own = (f"; {f['total'] / own_dense[name][1]:.2f}x plain {own_dense[name][0]} embedding"
               if name in own_dense else "")
        print(f"{name}: {f['total'] / dense_mean:.2f}x plain dense embedding (runs only {f['runs'] / dense_mean:.2f}x){own}, "
              f"{f['total'] / bm25_s:.0f}x BM25; {turns / f['total']:.1f} turns/s")
        # Where the ratio comes from: the model's pass over the turns, the extraction step's own work
        # (spaCy's parse, the rules and the properties) and everything else (the other steps, Dagster).
        parts = f["parts"]
        model = parts.get(("episodes", "embed_seconds"), 0.0) + parts.get(("retrieval_index", "seconds"), 0.0)
        extraction = parts.get(("event_frames", "seconds"), 0.0)
        print(f"  of which MiniLM {model / dense_mean:.2f}x, extraction {extraction / dense_mean:.2f}x, "
              f"the rest {(f['total'] - model - extraction) / dense_mean:.2f}x")
    print(f"peak RSS: {rss_before:.0f} MB with the models loaded, {rss_build:.0f} MB after the builds, {peak_rss_mb():.0f} MB at the end")

    if args.profile:
        profiler = cProfile.Profile()
        profiler.enable()
        build(work / "profiled", args.data, ids, settings)
        profiler.disable()
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(args.profile)
        print(out.getvalue())


if __name__ == "__main__":
    main()
