"""Grid over retrieval settings: evidence recall@10 and @25 against dense, on built conversations.

    .venv/bin/python benchmarks/tune_retrieval.py --store DIR --conversation conv-26 [--conversation ...]

Build the conversations first (`seem build ... --store DIR`). Recall here is the plain share of
gold turns found (no evidence normalisation: that is the evaluation harness's job).
"""

from __future__ import annotations

import argparse
import itertools
from dataclasses import replace

import numpy as np

from seem_dagster import backends
from seem_dagster.retrieval.load import load_index
from seem_dagster.retrieval.query import encode_query
from seem_dagster.retrieval.search import RetrievalConfig, retrieve
from seem_dagster.schemas import Passages, Questions
from seem_dagster.store.snapshot import read_table, table_path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", required=True)
    parser.add_argument("--conversation", action="append", required=True)
    args = parser.parse_args()
    extractor, embedder = backends.extractor(), backends.embedder()
    prepared = []
    for cid in args.conversation:
        index = load_index(args.store, cid)
        questions = read_table(table_path(args.store, "questions", cid))
        ref = dict(zip(index.passages[Passages.passage_id].to_list(), index.passages[Passages.source_ref].to_list()))
        date = index.passages[Passages.timestamp].max()
        encoded = [
            (encode_query(q, d or date, extractor, embedder, cid), set(e))
            for q, d, e in questions.select(Questions.question, Questions.question_date, Questions.evidence).iter_rows()
            if e
        ]
        prepared.append((index, encoded, ref))

    def recall(config: RetrievalConfig, k: int) -> float:
        values = []
        for index, encoded, ref in prepared:
            for query, gold in encoded:
                found = {ref[r.passage_id] for r in retrieve(index, query.vector, query.fact_vectors, config).ranked[:k]}
                values.append(len(gold & found) / len(gold))
        return float(np.mean(values))

    base = RetrievalConfig()
    dense = replace(base, use_graph=False, use_rpe=False)
    print(f"dense: R@10 {recall(dense, 10):.3f} R@25 {recall(dense, 25):.3f}")
    print("passage_share damping top_passages_rpe rpe_max_per_episode | R@10 R@25")
    for share, damping, top, most in itertools.product([0.05, 0.5, 2.0, 10.0], [0.5, 0.85], [0, 2, 5], [2, 10]):
        config = replace(base, passage_share=share, damping=damping, use_rpe=top > 0, top_passages_rpe=top, rpe_max_per_episode=most)
        print(f"{share} {damping} {top} {most} | {recall(config, 10):.3f} {recall(config, 25):.3f}")


if __name__ == "__main__":
    main()
