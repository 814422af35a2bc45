"""Question answering on top of retrieval: each method's context -> the model's answer -> the judge.

Each method answers from the context it renders within the same token budget
(``retrieval.context``): SEEM's turns in time order with the frames of the episodes that brought
them and the seed facts; a baseline's turns alone. Answers and verdicts are asked for in one batch
per conversation and cached with the other model calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from seem_dagster.evaluation.metrics import mean, token_f1
from seem_dagster.llm.client import CallRecord


@dataclass
class QaItem:
    method: str
    question_id: str
    question: str
    date: datetime
    gold: str
    context: str


@dataclass
class QaResult:
    item: QaItem
    answer: str | None  # None: the answering call failed
    correct: bool | None  # None: no answer, or the judge's call failed
    f1: float


def answer_and_judge(session, items: list[QaItem]) -> list[QaResult]:
    answers = session.answers([(f"{i.method}|{i.question_id}", i.question, i.date, i.context) for i in items])
    texts = [a["answer"] if a is not None else None for a in answers]
    to_judge = [(k, i, t) for k, (i, t) in enumerate(zip(items, texts)) if t is not None]
    verdicts = session.judge([(f"{i.method}|{i.question_id}", i.question, i.gold, t) for _, i, t in to_judge]) if to_judge else []
    correct: dict[int, bool | None] = {k: (v["correct"] if v is not None else None) for (k, _, _), v in zip(to_judge, verdicts)}
    return [QaResult(i, t, correct.get(k), token_f1(t, i.gold) if t is not None else 0.0) for k, (i, t) in enumerate(zip(items, texts))]


def summarise_qa(results: Sequence[QaResult], records: Sequence[CallRecord]) -> dict[str, dict]:
    """Per method: judge accuracy (a failed answer counts wrong; a failed verdict is left out and
    counted), token F1, and the answering tokens per question."""
    out: dict[str, dict] = {}
    answer_records = [r for r in records if r.prompt == "answer"]
    for method in dict.fromkeys(r.item.method for r in results):
        mine = [r for r in results if r.item.method == method]
        judged = [r for r in mine if r.answer is None or r.correct is not None]
        calls = [r for r in answer_records if r.item_id.startswith(f"{method}|")]
        out[method] = {
            "questions": len(mine),
            "accuracy_judge": mean(float(bool(r.correct)) for r in judged),
            "f1": mean(r.f1 for r in mine),
            "answer_failures": sum(r.answer is None for r in mine),
            "judge_failures": len(mine) - len(judged),
            "answer_prompt_tokens_per_question": mean(r.prompt_tokens for r in calls if not r.cached),
            "answer_completion_tokens_per_question": mean(r.completion_tokens for r in calls if not r.cached),
        }
    return out
