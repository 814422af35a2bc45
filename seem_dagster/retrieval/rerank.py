"""A learned reranking of a ranking's top passages (pure: numpy, no I/O but reading the bundled model).

The walk and RPE rank passages by rules whose weights were set by hand. Beside the rank they give,
a query already knows more about each passage than the rules use: its prior, its facts' match,
whether it replies to a question that matched, whether its speaker is the one the question names, and
how long it is (a turn of four words rarely holds the evidence). A logistic model over those
signals, fitted on LoCoMo dev by ``benchmarks/train_rerank.py`` and bundled as ``rerank_model.json``,
reorders the top ``retrieval.rerank_depth`` passages; the rest keep their order. (The evaluation
reranks a conversation the model was fitted on with the model fitted on the others: its folds are
kept in the same file and chosen in ``evaluation/folds.py``.) There is one model per base ranking:
``seem`` for the walk's ranking and ``prior`` for the passage prior alone (which the evaluation
also reranks), so what the reranker adds is never counted as the structure's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

MODEL_PATH = Path(__file__).with_name("rerank_model.json")
# The base rankings a model is fitted for: the walk's (retrieval with use_graph) and the prior's.
WALK_BASE, PRIOR_BASE = "seem", "prior"
BASES = (WALK_BASE, PRIOR_BASE)

# What the reranker reads of each candidate passage. The prior enters as retrieval mixed it (dense,
# unnamed and BM25, replies inheriting), never as its parts: the mix is tuned and held out on both
# benchmarks, while a model that re-weighted the parts learned LoCoMo's contrast between a turn's topic
# and its speaker's name, which a question naming no one (LongMemEval's) does not have, and lost
# LongMemEval questions (docs/experiments.md, 2026-12-05).
FEATURES = (
    "log_rank",        # log(1 + the passage's rank in the ranking being reordered)
    "prior",           # the passage prior / the best passage's
    "fact_key",        # the passage's best fact above min_fact_score, replies inheriting (retrieval's fact keys)
    "best_fact",       # the passage's best fact's match (0 without a fact)
    "is_reply",        # 1 when the passage answers the question turn before it
    "asked_prior",     # that question turn's prior / the best (0 for other passages)
    "named_speaker",   # 1 when the question names a speaker and this is that speaker's passage
    "other_speaker",   # 1 when the question names a speaker and this passage is someone else's
    "several",         # 1 when the question asks for several things (question_form)
    "several_x_rank",  # several * log_rank
    "log_words",       # log(1 + the passage's words)
)
FACT_FEATURES = ("fact_key", "best_fact")


@dataclass(frozen=True)
class Signals:
    """What a query computed: every passage's prior (rows aligned with MemoryIndex.passages) and, when
    it scored facts, every passage's fact key and every fact's match (rows aligned with its facts)."""

    prior: np.ndarray
    fact_key: np.ndarray | None = None
    fact_scores: np.ndarray | None = None


@dataclass(frozen=True)
class RerankModel:
    """A logistic model over ``features``. ``low`` and ``high`` are the range each feature had in the
    data it was fitted on: a value outside it (a 4,000-word pasted document, where LoCoMo's turns
    have at most a hundred words) is clipped to it, so the model never extrapolates a weight."""

    features: tuple[str, ...]
    low: np.ndarray
    high: np.ndarray
    mean: np.ndarray
    scale: np.ndarray
    weights: np.ndarray
    bias: float

    def score(self, matrix: np.ndarray) -> np.ndarray:
        """The model's log-odds for each row of ``matrix`` (columns in FEATURES order)."""
        columns = np.clip(matrix[:, [FEATURES.index(f) for f in self.features]], self.low, self.high)
        return ((columns - self.mean) / self.scale) @ self.weights + self.bias

    def to_json(self) -> dict:
        return {"features": list(self.features), **{k: getattr(self, k).tolist() for k in ARRAYS}, "bias": self.bias}

    @classmethod
    def from_json(cls, data: dict) -> RerankModel:
        unknown = [f for f in data["features"] if f not in FEATURES]
        if unknown:
            raise ValueError(f"{MODEL_PATH.name}: unknown reranker feature(s) {unknown}; known: {', '.join(FEATURES)}")
        arrays = [np.asarray(data[k], dtype=np.float64) for k in ARRAYS]
        if any(a.shape != (len(data["features"]),) for a in arrays):
            raise ValueError(f"{MODEL_PATH.name}: {', '.join(ARRAYS)} must have one value per feature")
        return cls(tuple(data["features"]), *arrays, float(data["bias"]))


ARRAYS = ("low", "high", "mean", "scale", "weights")


@lru_cache(maxsize=None)
def bundled_model(base: str) -> RerankModel:
    """The fitted model for the base ranking ``base`` ("seem" or "prior") from rerank_model.json: the
    one fitted on every conversation it was trained on, read once. (The file also keeps, under
    ``held_out``, one model per such conversation fitted without it: the evaluation's folds,
    ``evaluation/folds.py``, which a memory never reads.)"""
    return RerankModel.from_json(_base_entry(base))


def _base_entry(base: str) -> dict:
    if not MODEL_PATH.exists():
        raise FileNotFoundError(f"{MODEL_PATH} is missing: retrieval.rerank needs it (benchmarks/train_rerank.py --write makes it)")
    models = json.loads(MODEL_PATH.read_text(encoding="utf-8"))["models"]
    if base not in models:
        raise ValueError(f"{MODEL_PATH.name} has no model for the {base!r} ranking; it has {', '.join(models)}")
    return models[base]


def held_out_models(base: str) -> dict[str, RerankModel]:
    """conversation -> the ``base`` model fitted without that conversation (rerank_model.json's folds)."""
    return {c: RerankModel.from_json(m) for c, m in _base_entry(base).get("held_out", {}).items()}


def _share(values: np.ndarray) -> np.ndarray:
    top = values.max() if values.size else 0.0
    return values / top if top > 0 else np.zeros_like(values, dtype=np.float64)


def feature_matrix(rows: np.ndarray, signals: Signals, answers_to: np.ndarray, speakers: list[str], named: set[str],
                   words: np.ndarray, several: bool, fact_rows: np.ndarray) -> np.ndarray:
    """One row of FEATURES per candidate, ``rows`` the candidates' passage rows in ranking order;
    ``speakers`` every passage's speaker, ``named`` the speakers the question names, ``words`` every
    passage's word count, ``fact_rows`` each fact's passage row. Fact features are 0 when ``signals``
    has none (a model without them). Only a reranking pays for the passages' best fact match."""
    n = len(rows)
    log_rank = np.log1p(np.arange(n, dtype=np.float64))
    prior = _share(signals.prior)
    asked = answers_to[rows]
    replies = asked >= 0
    asked_prior = np.where(replies, prior[np.where(replies, asked, 0)], 0.0)
    fact_key = signals.fact_key[rows] if signals.fact_key is not None else np.zeros(n)
    best_fact = np.zeros(n)
    if signals.fact_scores is not None and signals.fact_scores.shape[0]:
        best = np.zeros(len(signals.prior))
        np.maximum.at(best, fact_rows, signals.fact_scores)
        best_fact = best[rows]
    own = np.array([speakers[r] in named for r in rows], dtype=np.float64) if named else np.zeros(n)
    other = (1.0 - own) if named else np.zeros(n)
    flag = float(several)
    columns = {
        "log_rank": log_rank, "prior": prior[rows], "fact_key": fact_key, "best_fact": best_fact,
        "is_reply": replies.astype(np.float64), "asked_prior": asked_prior, "named_speaker": own, "other_speaker": other,
        "several": np.full(n, flag), "several_x_rank": flag * log_rank, "log_words": np.log1p(words[rows].astype(np.float64)),
    }
    return np.column_stack([columns[f] for f in FEATURES]) if n else np.zeros((0, len(FEATURES)))


def reorder(model: RerankModel, matrix: np.ndarray) -> np.ndarray:
    """The candidates' order by the model's score, best first; ties keep the ranking's order."""
    return np.argsort(-model.score(matrix), kind="stable")


def fit(matrix: np.ndarray, labels: np.ndarray, features: tuple[str, ...], l2: float = 1.0, iterations: int = 50) -> RerankModel:
    """L2-regularised logistic regression by Newton's method on standardised columns (the bias is not
    penalised): deterministic, no solver package. ``matrix`` has FEATURES columns; ``features`` the
    ones the model reads."""
    x = matrix[:, [FEATURES.index(f) for f in features]].astype(np.float64)
    low, high = x.min(axis=0), x.max(axis=0)
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale = np.where(scale > 0, scale, 1.0)
    z = np.column_stack([(x - mean) / scale, np.ones(len(x))])
    y = labels.astype(np.float64)
    beta = np.zeros(z.shape[1])
    penalty = np.full(z.shape[1], l2)
    penalty[-1] = 0.0
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-(z @ beta)))
        gradient = z.T @ (p - y) + penalty * beta
        hessian = (z * (p * (1 - p))[:, None]).T @ z + np.diag(penalty)
        step = np.linalg.solve(hessian, gradient)
        beta -= step
        if np.abs(step).max() < 1e-10:
            break
    return RerankModel(tuple(features), low, high, mean, scale, beta[:-1], float(beta[-1]))
