"""Grid over fusion settings on LoCoMo: how many multi-hop evidence pairs share an episode, and at what size.

    .venv/bin/python benchmarks/tune_fusion.py [--conversations conv-26,conv-30,conv-41]

Pair recall = share of (evidence turn, evidence turn) pairs of category-1 questions that fusion put
in one episode; mean size = passages per episode. Higher pair recall at a small size is better.
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

import numpy as np
import polars as pl

from seem_dagster import backends
from seem_dagster.config import FusionConfig
from seem_dagster.episodic.extraction.interface import inputs_from_passages, to_tables
from seem_dagster.episodic.tables import frame_items, fuse_frames
from seem_dagster.ingest import load_input
from seem_dagster.schemas import Episodes, EventFrames, Passages, Questions

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo_dev7.json"


def prepare(path: Path, conversations: list[str]):
    extractor, embedder = backends.extractor(), backends.embedder()
    prepared = []
    for conv in load_input(path, conversations=conversations):
        inputs = inputs_from_passages(conv.passages)
        frames, _ = to_tables(inputs, extractor.extract(inputs), extractor.name)
        prepared.append((conv, frames, embedder.encode(frames[EventFrames.summary].to_list())))
    return prepared


def evaluate(prepared, config: FusionConfig) -> tuple[float, float, int]:
    pairs = together = 0
    sizes: list[int] = []
    for conv, frames, vectors in prepared:
        table = fuse_frames(frame_items(frames, conv.passages, vectors), config).episodes
        episode_of = {}
        for index, pids in enumerate(table[Episodes.passage_ids].to_list()):
            sizes.append(len(pids))
            episode_of.update({p: index for p in pids})
        by_ref = dict(zip(conv.passages[Passages.source_ref], conv.passages[Passages.passage_id]))
        for evidence in conv.questions.filter(pl.col(Questions.category) == "1")[Questions.evidence].to_list():
            turns = [by_ref[e] for e in evidence if e in by_ref]
            for a, b in itertools.combinations(turns, 2):
                pairs += 1
                together += episode_of[a] == episode_of[b]
    return together / max(pairs, 1), float(np.mean(sizes)), len(sizes)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--conversations", default="conv-26,conv-30,conv-41")
    args = parser.parse_args()
    prepared = prepare(args.data, args.conversations.split(","))
    print("threshold participant_bonus adjacency_bonus time_bonus max_passages link | pair_recall mean_size episodes")
    grid = itertools.product([0.62, 0.65, 0.68, 0.72], [0.0, 0.15], [0.0, 0.1], [0.0, 0.05], [16, 32], ["max", "centroid"])
    for th, pb, ab, tb, cap, link in grid:
        config = FusionConfig(threshold=th, participant_bonus=pb, adjacency_bonus=ab, time_bonus=tb, max_passages=cap, link=link)
        recall, size, count = evaluate(prepared, config)
        print(f"{th} {pb} {ab} {tb} {cap} {link} | {recall:.3f} {size:.2f} {count}")


if __name__ == "__main__":
    main()
