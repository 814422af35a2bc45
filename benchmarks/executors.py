"""The same conversations built with the in-process executor and with the multiprocess executor:
the memories must be equal table by table; prints the wall time of each, their ratio, and each
stage's seconds per 1k turns (from the in-process build's step timings), the rates the scale-out
table in docs/experiments.md starts from.

    .venv/bin/python benchmarks/executors.py [--data ../shared/data/locomo/locomo_dev7.json] [--limit N]

Exits 1 when the two memories differ. Slow on 2 cores: every multiprocess step is a new process that
imports Dagster and loads spaCy and MiniLM again.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from dagster import DagsterInstance

from seem_dagster.config import Layer, resolve
from seem_dagster.defs.assemble import build_defs
from seem_dagster.defs.runner import build_conversations
from seem_dagster.pipeline.stages import MEMORY_TABLES
from seem_dagster.registry import register_file
from seem_dagster.store import snapshot

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo_dev7.json"


def build(store: Path, data: Path, conversations: list[str] | None, settings: dict) -> tuple[list, float, int]:
    resolved = resolve([Layer("benchmark", {"store.root": str(store), **settings})])
    registered = register_file(str(store), str(data), "locomo", conversations=conversations)
    ids = [r.conversation_id for r in registered]
    started = time.perf_counter()
    outcomes = build_conversations(build_defs(resolved), ids, instance=DagsterInstance.ephemeral(), config=resolved)
    wall = time.perf_counter() - started
    failed = [o for o in outcomes if not o.success]
    if failed:
        sys.exit(f"{settings or 'in process'}: {failed[0].conversation_id}: {failed[0].error}")
    return outcomes, wall, sum(r.passages for r in registered)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--limit", type=int, default=None, help="only the first N conversations")
    parser.add_argument("--max-concurrent", type=int, default=0, help="multiprocess: step processes at once (0: one per CPU)")
    args = parser.parse_args()
    import json

    ids = [c["sample_id"] for c in json.loads(args.data.read_text())][: args.limit]
    with tempfile.TemporaryDirectory(prefix="seem-executors-") as tmp:
        root = Path(tmp)
        in_process, in_s, turns = build(root / "in-process", args.data, ids, {})
        print(f"in process:   {len(ids)} conversations, {turns} turns, {in_s:.1f} s", flush=True)
        multi, multi_s, _ = build(root / "multiprocess", args.data, ids,
                                  {"execution.executor": "multiprocess", "execution.max_concurrent": args.max_concurrent})
        print(f"multiprocess: {multi_s:.1f} s ({multi_s / in_s:.2f}x the in-process wall time)", flush=True)

        differ = []
        for cid in ids:
            a = snapshot.read_snapshot(root / "in-process", cid, MEMORY_TABLES)
            b = snapshot.read_snapshot(root / "multiprocess", cid, MEMORY_TABLES)
            differ += [f"{cid}/{t}" for t in MEMORY_TABLES if not a[t].equals(b[t])]
        tables = len(ids) * len(MEMORY_TABLES)
        print(f"memories: {tables - len(differ)} of {tables} tables equal" + (f"; differ: {', '.join(differ)}" if differ else ""))

        steps: dict[str, float] = defaultdict(float)
        for outcome in in_process:
            for step, seconds in (outcome.step_seconds or {}).items():
                steps[step] += seconds
        print("\nin-process step seconds per 1k turns (checks summed):")
        checks = sum(s for k, s in steps.items() if k not in ("ingest_conversation", "extract_frames", "episodes", "build_graph",
                                                             "retrieval_index", "memory"))
        for step in ("ingest_conversation", "extract_frames", "episodes", "build_graph", "retrieval_index", "memory"):
            print(f"  {step:<20} {steps.get(step, 0.0) * 1000 / turns:7.1f}")
        print(f"  {'checks':<20} {checks * 1000 / turns:7.1f}")
        total = sum(steps.values())
        print(f"  {'all steps':<20} {total * 1000 / turns:7.1f}   (wall {in_s * 1000 / turns:.1f}: Dagster's per-run cost is the rest)")
        print(f"one in-process worker: {turns / in_s * 3600:,.0f} turns per hour")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
