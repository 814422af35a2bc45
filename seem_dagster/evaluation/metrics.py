"""Retrieval metrics by the benchmarks' official rules (pure: rankings and gold ids in, numbers out).

LoCoMo: evidence recall@k (the share of a question's evidence turns among the top k; empty
evidence counts 1), after normalising the release's broken evidence strings.
LongMemEval: recall_any, recall_all and ndcg_any as in the official ``src/retrieval/eval_utils.py``,
whose DCG leaves the first two ranks undiscounted; the "noans" rule decides session gold.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence

LOCOMO_CATEGORIES = {"1": "multi-hop", "2": "temporal", "3": "open-domain", "4": "single-hop", "5": "adversarial"}
_DIA_ID = re.compile(r"^D(\d+):(\d+)$")


def normalise_locomo_evidence(raw: Iterable[str], valid: set[str]) -> list[str]:
    """Split joined ids ("D8:6; D9:17", "D1:2 D1:3"), repair "D:11:26" and "D30:05", drop "D" and unknown ids."""
    out: list[str] = []
    for item in raw:
        for token in re.split(r"[;,\s]+", str(item)):
            token = token.strip()
            if token.startswith("D:"):
                token = "D" + token[2:]
            match = _DIA_ID.match(token)
            if not match:
                continue
            dia_id = f"D{int(match.group(1))}:{int(match.group(2))}"
            if dia_id in valid and dia_id not in out:
                out.append(dia_id)
    return out


def evidence_recall(gold: Sequence[str], retrieved: Sequence[str], k: int) -> float:
    if not gold:
        return 1.0
    top = set(retrieved[:k])
    return sum(1 for g in gold if g in top) / len(gold)


def first_occurrences(units: Iterable[str]) -> list[str]:
    """A ranking of turns -> a ranking of the units they belong to, each at its best rank."""
    seen: set[str] = set()
    out = []
    for unit in units:
        if unit not in seen:
            seen.add(unit)
            out.append(unit)
    return out


def _dcg(relevances: Sequence[float], k: int) -> float:
    rel = list(relevances)[:k]
    if not rel:
        return 0.0
    return rel[0] + sum(r / math.log2(i) for i, r in enumerate(rel[1:], start=2))


def recall_any(ranked: Sequence[str], gold: set[str], k: int) -> float:
    top = set(ranked[:k])
    return float(any(g in top for g in gold))


def recall_all(ranked: Sequence[str], gold: set[str], k: int) -> float:
    top = set(ranked[:k])
    return float(all(g in top for g in gold))


def ndcg_any(ranked: Sequence[str], gold: set[str], k: int, corpus_size: int) -> float:
    """Binary relevance; the ideal ranking puts every gold unit of the corpus first."""
    ideal = _dcg([1.0] * min(len(gold), corpus_size), k)
    if ideal == 0:
        return 0.0
    return _dcg([1.0 if u in gold else 0.0 for u in ranked[:k]], k) / ideal


def longmemeval_session_gold(answer_session_ids: Iterable[str], gold_turn_sessions: Iterable[str]) -> set[str]:
    """The "noans" rule: an answer session counts only if one of its user turns has has_answer."""
    with_answer = set(gold_turn_sessions)
    return {s for s in answer_session_ids if s in with_answer}


def is_abstention(question_id: str) -> bool:
    return question_id.endswith("_abs")


def mean(values: Iterable[float]) -> float | None:
    values = list(values)
    return sum(values) / len(values) if values else None


_ARTICLES = re.compile(r"\b(a|an|the|and)\b")
_PUNCT = re.compile(r"[^\w\s]")


def answer_tokens(text: str) -> list[str]:
    """LoCoMo's answer normalisation: lower case, no punctuation, no articles or 'and' (no stemming)."""
    return _ARTICLES.sub(" ", _PUNCT.sub(" ", str(text).lower())).split()


def token_f1(prediction: str, gold: str) -> float:
    pred, ref = answer_tokens(prediction), answer_tokens(gold)
    if not pred or not ref:
        return float(pred == ref)
    common = sum(min(pred.count(t), ref.count(t)) for t in set(pred))
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)
