"""Per-question scores and their aggregation into the results.json figures (pure)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from seem_dagster.evaluation.metrics import (
    LOCOMO_CATEGORIES,
    evidence_recall,
    first_occurrences,
    longmemeval_session_gold,
    mean,
    ndcg_any,
    recall_all,
    recall_any,
)
from seem_dagster.ingest.longmemeval import session_of
from seem_dagster.schemas import Questions

LME_KS = (1, 3, 5, 10, 30, 50)


@dataclass
class LocomoQuestion:
    category: str
    scores: dict[str, float]  # "recall@10", "recall@budget1000", ...
    conversation: str = ""  # the conversation asked about (the ablation counts conversations too)


def score_locomo(
    gold: Sequence[str], ranked_refs: Sequence[str], ks: Sequence[int], in_context: Mapping[int, Sequence[str]]
) -> dict[str, float]:
    """Recall in the top k, and among the turns each budget's context holds (``in_context``: budget in
    tokens -> the refs of the turns the method's context includes)."""
    scores = {f"recall@{k}": evidence_recall(gold, ranked_refs, k) for k in ks}
    for budget, within in in_context.items():
        scores[f"recall@budget{budget}"] = evidence_recall(gold, within, len(within))
    return scores


def locomo_category(raw: str | None) -> str:
    raw = (raw or "").strip()
    return f"{raw} {LOCOMO_CATEGORIES[raw]}" if raw in LOCOMO_CATEGORIES else (raw or "none")


def summarise_locomo(questions: Sequence[LocomoQuestion]) -> dict[str, dict]:
    """metric -> {"overall", "categories_1_4", "by_category"} as the official LoCoMo reporting."""
    out: dict[str, dict] = {}
    metrics = list(questions[0].scores) if questions else []
    cats = sorted({q.category for q in questions})
    for metric in metrics:
        out[metric] = {
            "overall": mean(q.scores[metric] for q in questions),
            "categories_1_4": mean(q.scores[metric] for q in questions if q.category[:1] in "1234" and q.category[:1]),
            "by_category": {c: mean(q.scores[metric] for q in questions if q.category == c) for c in cats},
            "questions": len(questions),
        }
    return out


def score_longmemeval(ranked_units: Sequence[str], gold: set[str], corpus_size: int, ks: Sequence[int] = LME_KS) -> dict[str, float]:
    ranked_units = first_occurrences(ranked_units)
    scores = {}
    for k in ks:
        scores[f"recall_any@{k}"] = recall_any(ranked_units, gold, k)
        scores[f"recall_all@{k}"] = recall_all(ranked_units, gold, k)
        scores[f"ndcg_any@{k}"] = ndcg_any(ranked_units, gold, k, corpus_size)
    return scores


def summarise_longmemeval(per_question: Sequence[tuple[str, dict[str, float]]]) -> dict:
    """(question_type, scores) pairs -> mean of every metric, overall and by question type."""
    if not per_question:
        return {}
    metrics = list(per_question[0][1])
    out: dict = {m: mean(s[m] for _, s in per_question) for m in metrics}
    out["questions"] = len(per_question)
    out["by_type"] = {
        t: {m: mean(s[m] for qt, s in per_question if qt == t) for m in metrics}
        for t in sorted({qt for qt, _ in per_question})
    }
    return out


def score_lme_question(granularity: str, q: dict, refs: list[str], speakers: list[str], corpus_refs) -> dict[str, float]:
    """One LongMemEval question's scores of a ranking (``refs``, with their ``speakers``): at the turn
    level over the user turns, at the session level over the haystack's sessions (``corpus_refs``)."""
    gold_turns = set(q[Questions.evidence])
    if granularity == "turn":
        user_refs = [r for r, s in zip(refs, speakers) if s == "user"]
        return score_longmemeval(user_refs, gold_turns, len(user_refs))
    gold = longmemeval_session_gold(q[Questions.evidence_sessions], {session_of(r) for r in gold_turns})
    sessions = {session_of(r) for r in corpus_refs}
    return score_longmemeval([session_of(r) for r in refs], gold, len(sessions))
