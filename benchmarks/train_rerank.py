"""Fit the reranker (retrieval/rerank.py) on LoCoMo memories, and say what it adds on conversations it
was not fitted on.

    .venv/bin/python benchmarks/train_rerank.py --store eval/locomo/store [--write]

``--store``: a store `seem eval locomo` built (its questions carry the evidence). For each base ranking
(``seem`` and the passage ``prior``, neither reranked) it collects the reranker's features of the
top ``retrieval.rerank_depth`` passages of every question, labelled by whether the passage is
evidence. It prints R@5 / R@10 / R@25 and R@10 per category of the ranking as it is and reranked by a
model fitted on the other conversations (leave one conversation out: the figure to expect on
conversations the bundled model has not seen), then fits on all of them; ``--write`` saves that model
and the held-out ones to retrieval/rerank_model.json with where they came from. A memory of one of
those conversations is reranked by the model fitted without it, so `seem eval` on the same data
reports held-out figures.

It also builds the bundled sample (data/, 48 turns written for the demo, its gold marking the turns
an answer needs, the other speaker's included) into a temporary store and prints what the model
fitted on all does to it. No model is fitted on it: it is where a model that learned LoCoMo's
evidence marking rather than the questions shows (docs/experiments.md, 2026-12-05).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from seem_dagster import Memory
from seem_dagster.config import resolve_standard
from seem_dagster.evaluation.methods import method_config
from seem_dagster.evaluation.metrics import is_abstention, normalise_locomo_evidence
from seem_dagster.evaluation.sample import write_sample_as_locomo
from seem_dagster.evaluation.scoring import locomo_category
from seem_dagster.retrieval.answer import rank
from seem_dagster.retrieval.query import form_of
from seem_dagster.retrieval.rerank import FACT_FEATURES, FEATURES, MODEL_PATH, RerankModel, fit, reorder
from seem_dagster.retrieval.search import rerank_features
from seem_dagster.schemas import Questions
from seem_dagster.store.snapshot import read_table, table_path
from seem_dagster.store.sources import registered_conversations

BASES = {"seem": "seem", "prior": "prior"}  # model name -> the method whose ranking it reorders (reranking off)
CUTS = (5, 10, 25)


def collect(store: str, base_method: str, depth: int, benchmark: str = "locomo") -> list[dict]:
    """Per question: its conversation, category (LongMemEval: question type), the features and labels of
    its top ``depth`` passages, and the refs of its whole ranking (LongMemEval: its user turns, which
    its turn recall counts; abstention questions left out)."""
    rows = []
    with Memory.open(store) as memory:  # the question read and ranked as `Memory.search` and `seem eval` do
        retrieval = method_config(memory.config.retrieval.replace(rerank=False), base_method)
        for cid in registered_conversations(store):
            rows += _collect_conversation(memory, cid, retrieval, depth, benchmark)
            memory.unload(cid)
    return rows


def _collect_conversation(memory: Memory, cid: str, retrieval, depth: int, benchmark: str) -> list[dict]:
    rows = []
    index = memory.index(cid)
    questions = read_table(table_path(memory.store, "questions", cid))
    refs = index.source_refs
    for q in questions.iter_rows(named=True):
        if benchmark == "longmemeval" and is_abstention(q[Questions.question_id]):
            continue
        gold = (normalise_locomo_evidence(q[Questions.evidence], set(refs.values())) if benchmark == "locomo"
                else list(q[Questions.evidence]))
        # Whether it asks for several things, read as when reranking is on (a reranker feature).
        several = form_of(q[Questions.question], memory.config.retrieval.replace(rerank=True))
        # The question's facts parsed as a query parses them (they are encoded in its forward pass).
        query = memory.encode(cid, q[Questions.question], q[Questions.question_date], several=several)
        result = rank(index, query, retrieval)
        head = result.ranked[:depth]
        ranking = [refs[r.passage_id] for r in result.ranked]
        category = locomo_category(q[Questions.category]) if benchmark == "locomo" else (q[Questions.category] or "none")
        rows.append({"benchmark": benchmark, "conversation": cid, "category": category, "gold": gold, "ranking": ranking,
                     "features": rerank_features(index, head, result.signals, query.question, several),
                     "labels": np.array([ref in gold for ref in ranking[:depth]], dtype=np.float64)})
    return rows


def recall(ranking: list[str], gold: list[str], k: int, benchmark: str) -> float:
    """LoCoMo's evidence recall at k; LongMemEval's turn recall_all (1 when every evidence turn is in the top k)."""
    found = len(set(ranking[:k]) & set(gold))
    return found / len(gold) if benchmark == "locomo" else float(found == len(set(gold)))


def reranked(model: RerankModel, row: dict) -> list[str]:
    """A question's whole ranking with its top passages reordered by ``model``."""
    return [row["ranking"][i] for i in reorder(model, row["features"])] + row["ranking"][len(row["features"]):]


def fit_rows(rows: list[dict], features: tuple[str, ...], l2: float) -> RerankModel:
    train = [r for r in rows if r["gold"]]
    return fit(np.vstack([r["features"] for r in train]), np.concatenate([r["labels"] for r in train]), features, l2)


def held_out(rows: list[dict], features: tuple[str, ...], l2: float, benchmark: str, folds: dict) -> dict[str, list[float]]:
    """Each conversation of ``benchmark`` reranked by a model fitted on every other conversation's
    questions (both benchmarks'), which ``folds`` keeps by conversation; per question and cut, recall
    before and after."""
    scores = defaultdict(list)
    for held in sorted({r["conversation"] for r in rows if r["benchmark"] == benchmark}):
        model = folds[held] = fit_rows([r for r in rows if r["conversation"] != held], features, l2)
        for r in rows:
            if r["conversation"] != held or not r["gold"] or r["benchmark"] != benchmark:
                continue
            after = reranked(model, r)
            for k in CUTS:
                scores[f"before {k}"].append(recall(r["ranking"], r["gold"], k, benchmark))
                scores[f"after {k}"].append(recall(after, r["gold"], k, benchmark))
            scores["category"].append(r["category"])
    return scores


def report(name: str, benchmark: str, scores: dict[str, list]) -> None:
    categories = np.array(scores["category"])
    metric = "R" if benchmark == "locomo" else "turn recall_all"
    for when in ("before", "after"):
        overall = " / ".join(f"{np.mean(scores[f'{when} {k}']):.3f}" for k in CUTS)
        r10 = np.array(scores[f"{when} 10"])
        per = ", ".join(f"{c} {r10[categories == c].mean():.3f}" for c in sorted(set(categories)))
        label = f"{name} reranked, held out" if when == "after" else name
        print(f"{benchmark} {label:<28} {metric}@5 / @10 / @25 {overall} | @10 {per}")
    for k in (5, 10):
        d = np.array(scores[f"after {k}"]) - np.array(scores[f"before {k}"])
        print(f"{'':<38} @{k} change {d.mean():+.4f}: {int((d > 0).sum())} questions better, {int((d < 0).sum())} worse")


def sample_store(workdir: Path) -> str:
    """The bundled sample in LoCoMo's format, built by `seem eval locomo` into a store under ``workdir``."""
    data = write_sample_as_locomo(workdir / "sample_locomo.json")
    store = workdir / "store"
    seem = str(Path(sys.executable).parent / "seem")
    built = subprocess.run([seem, "eval", "locomo", "--data", str(data), "--out", str(workdir / "eval"), "--store", str(store),
                            "--methods", "seem", "--quiet"], capture_output=True, text=True)
    if built.returncode:
        raise SystemExit(f"building the bundled sample ({data}) failed:\n{built.stderr[-2000:]}")
    return str(store)


def report_sample(name: str, rows: list[dict], model: RerankModel) -> None:
    """What ``model`` does to the sample's questions: R@5 / R@10, and its gold turns in the top 10."""
    asked = [r for r in rows if r["gold"]]
    figures = {}
    for when, ranking in (("before", lambda r: r["ranking"]), ("after", lambda r: reranked(model, r))):
        pairs = [(ranking(r), r["gold"]) for r in asked]
        r5, r10 = (np.mean([recall(rk, gold, k, "locomo") for rk, gold in pairs]) for k in (5, 10))
        found = sum(len(set(rk[:10]) & set(gold)) for rk, gold in pairs)
        figures[when] = f"R@5 / @10 {r5:.3f} / {r10:.3f}, {found} of {sum(len(g) for _, g in pairs)} gold turns in the top 10"
    print(f"{'bundled sample (not fitted on)':<38} {name}: {figures['before']}; reranked: {figures['after']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", required=True, help="a store `seem eval locomo` built")
    parser.add_argument("--lme-store", help="also fit on the memories of this store, which `seem eval longmemeval` built")
    parser.add_argument("--l2", type=float, default=1.0, help="the logistic model's L2 penalty on standardised features")
    parser.add_argument("--write", action="store_true", help=f"save the models fitted on every conversation to {MODEL_PATH}")
    args = parser.parse_args()
    depth = resolve_standard().config.retrieval.rerank_depth
    started = time.perf_counter()
    models, folds = {}, {}
    with tempfile.TemporaryDirectory(prefix="seem-rerank-sample-") as workdir:
        sample = sample_store(Path(workdir))
        for name, method in BASES.items():
            features = FEATURES if name == "seem" else tuple(f for f in FEATURES if f not in FACT_FEATURES)
            rows = collect(args.store, method, depth) + (collect(args.lme_store, method, depth, "longmemeval") if args.lme_store else [])
            print(f"{name}: {len(rows)} questions, {len({r['conversation'] for r in rows})} conversations, top {depth} passages")
            folds[name] = {}
            for benchmark in sorted({r["benchmark"] for r in rows}):
                report(name, benchmark, held_out(rows, features, args.l2, benchmark, folds[name]))
            models[name] = fit_rows(rows, features, args.l2)
            weights = ", ".join(f"{f} {w:+.2f}" for f, w in sorted(zip(features, models[name].weights), key=lambda t: -abs(t[1])))
            print(f"{'':<28} fitted on all: {weights}")
            report_sample(name, collect(sample, method, depth), models[name])
    print(f"{time.perf_counter() - started:.0f} s")
    if args.write:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=Path(__file__).parent).stdout.strip()
        stores = {"locomo": args.store, **({"longmemeval": args.lme_store} if args.lme_store else {})}
        MODEL_PATH.write_text(json.dumps({
            "fitted_on": {"conversations": {b: len(registered_conversations(s)) for b, s in stores.items()}, "depth": depth,
                          "l2": args.l2, "commit": commit,
                          "command": "benchmarks/train_rerank.py --store STORE" + (" --lme-store STORE" if args.lme_store else "") + " --write"},
            # Per base ranking: the model fitted on every conversation, and under "held_out" the one fitted
            # without each of them, which reranks that conversation's own memory (retrieval/rerank.py).
            "models": {name: {**model.to_json(), "held_out": {c: m.to_json() for c, m in sorted(folds[name].items())}}
                       for name, model in models.items()},
        }, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {MODEL_PATH}")


if __name__ == "__main__":
    main()
