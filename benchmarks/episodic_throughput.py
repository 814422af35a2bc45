"""Throughput of the episodic layer on one LoCoMo dev conversation, with same-run baselines.

    .venv/bin/python benchmarks/episodic_throughput.py [--conversation conv-26]

Prints passages per second for extraction, embedding and fusion, each beside a baseline measured
in the same process: the bare spaCy parse (what extraction adds on top of the NLP pipeline), a
warm embedding cache (what the text-hash cache saves on a rebuild) and fusing only the last session
into saved episodes (what an incremental backfill costs against fusing everything).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import polars as pl

from seem_dagster import backends
from seem_dagster.config import FusionConfig
from seem_dagster.embeddings import CachedEmbedder
from seem_dagster.episodic.extraction.interface import inputs_from_passages, to_tables
from seem_dagster.episodic.tables import frame_items, fuse_frames
from seem_dagster.ingest import load_input
from seem_dagster.schemas import EventFrames, Passages

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo_dev7.json"


def timed(fn):
    started = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--conversation", default="conv-26")
    args = parser.parse_args()
    (conv,) = load_input(args.data, conversations=[args.conversation])
    n = conv.passages.height
    extractor, embedder = backends.extractor(), backends.embedder()
    inputs = inputs_from_passages(conv.passages)
    # Load models outside the timings (seconds each, once per process).
    extractor.extract(inputs[:2])
    embedder.encode(["warm up"])

    _, parse_s = timed(lambda: list(extractor.nlp.pipe([i.text for i in inputs], batch_size=extractor.batch_size)))
    results, extract_s = timed(lambda: extractor.extract(inputs))
    frames, facts = to_tables(inputs, results, extractor.name)

    cache = CachedEmbedder(embedder)
    summaries = frames[EventFrames.summary].to_list()
    vectors, embed_s = timed(lambda: cache.encode(summaries))
    _, warm_s = timed(lambda: cache.encode(summaries))

    config = FusionConfig()
    items = frame_items(frames, conv.passages, vectors)
    full, fuse_s = timed(lambda: fuse_frames(items, config))
    last = conv.passages[Passages.session_index].max()
    early_ids = set(conv.passages.filter(pl.col(Passages.session_index) < last)[Passages.passage_id])
    before = fuse_frames([i for i in items if i.passage_id in early_ids], config)
    incremental, inc_s = timed(lambda: fuse_frames(items, config, before.episodes, before.digests))
    assert incremental.episodes.equals(full.episodes)
    new_frames = n - len(early_ids)

    print(f"{args.conversation}: {n} passages, {frames.height} frames, {facts.height} facts, {full.episodes.height} episodes "
          f"(fusion rate {full.stats.fusion_rate:.2f})")
    print(f"{'stage':<34}{'seconds':>9}{'passages/s':>12}")
    rows = [
        ("spaCy parse only (baseline)", parse_s, n),
        ("extraction (parse + roles + time)", extract_s, n),
        ("embedding, cold cache", embed_s, n),
        ("embedding, warm cache (baseline)", warm_s, n),
        ("fusion, full", fuse_s, n),
        (f"fusion, last session only ({new_frames})", inc_s, new_frames),
    ]
    for name, seconds, count in rows:
        print(f"{name:<34}{seconds:>9.3f}{count / seconds:>12.1f}")
    print(f"extraction / parse time: {extract_s / parse_s:.2f}x")
    print(f"cold / warm embedding time: {embed_s / max(warm_s, 1e-9):.0f}x")
    print(f"full / incremental fusion time: {fuse_s / max(inc_s, 1e-9):.2f}x")


if __name__ == "__main__":
    main()
