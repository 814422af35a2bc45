"""Query latency of SEEM against dense-only retrieval on one LoCoMo dev conversation, same run.

    .venv/bin/python benchmarks/query_latency.py [--store DIR] [--conversation conv-26]

Without --store it builds the conversation into a temporary store first (about a minute). Every
question of the conversation is asked both ways, interleaved, after one warm-up query each: SEEM as
a user asks it (`Memory.search`, the manifest check included), dense as the question's MiniLM vector
and one matrix product over the same passages. The figures are end to end per query and the ratio
is SEEM / dense.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from seem_dagster import Memory, backends
from seem_dagster.schemas import Questions
from seem_dagster.store.snapshot import read_table, table_path

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo_dev7.json"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--store")
    parser.add_argument("--conversation", default="conv-26")
    parser.add_argument("--data", type=Path, default=DATA)
    args = parser.parse_args()
    store = args.store
    if store is None:
        store = tempfile.mkdtemp(prefix="seem-bench-")
        seem = Path(sys.executable).parent / "seem"
        subprocess.run([str(seem), "build", "--input", str(args.data), "--conversation", args.conversation,
                        "--store", store, "--quiet"], check=True)
    memory = Memory.open(store)  # SEEM_CONFIG and SEEM_* variables choose the settings measured
    index = memory.index(args.conversation)
    questions = read_table(table_path(store, "questions", args.conversation))
    embedder = backends.query_embedder(memory.config.extraction.embedder)  # the encoder a query uses

    def seem(q: str) -> float:
        started = time.perf_counter()
        memory.search(args.conversation, q, k=10)
        return time.perf_counter() - started

    def dense(q: str) -> float:
        started = time.perf_counter()
        v = embedder.encode([q])[0]
        np.argsort(-(index.passage_vectors @ v))
        return time.perf_counter() - started

    texts = questions[Questions.question].to_list()
    seem(texts[0])
    dense(texts[0])
    seem_s, dense_s = [], []
    for q in texts:
        seem_s.append(seem(q))
        dense_s.append(dense(q))
    p = lambda xs, q: float(np.percentile(xs, q)) * 1000  # noqa: E731
    print(f"{args.conversation}: {index.passages.height} passages, {index.facts.height} facts, "
          f"{index.graph.graph.vcount()} nodes, {index.graph.graph.ecount()} edges, {len(texts)} questions")
    print(f"{'method':<8}{'p50 ms':>9}{'p95 ms':>9}")
    print(f"{'seem':<8}{p(seem_s, 50):>9.1f}{p(seem_s, 95):>9.1f}")
    print(f"{'dense':<8}{p(dense_s, 50):>9.1f}{p(dense_s, 95):>9.1f}")
    print(f"seem / dense: p50 {p(seem_s, 50) / p(dense_s, 50):.1f}x, p95 {p(seem_s, 95) / p(dense_s, 95):.1f}x")


if __name__ == "__main__":
    main()
