"""The ablation: which methods add one part each, and whether a part's change is outside noise (pure).

A part's change is measured per question on the same memory (the method with the part against the
method without it, both ranking the same questions), so the interval comes from a paired bootstrap:
the questions are drawn again with replacement, the mean difference taken each time, and the
interval is the middle ``level`` of those means. Questions are resampled, not conversations: the
interval says how much the figure would move on other questions like these, not on other
conversations (LoCoMo dev has seven), so it is the narrower of the two.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from seem_dagster import methods as registry
from seem_dagster.evaluation.scoring import LocomoQuestion


def chain() -> list[tuple[str, str]]:
    """(method, label) of each step that adds one part to the one before it, in the registry's order."""
    return [(m.name, m.step.label) for m in registry.all_methods() if m.step is not None and m.step.kind == "chain"]


def taken_away() -> list[tuple[str, str, str]]:
    """(method without the part, the method with it, label) of the parts measured by taking them away."""
    return [(m.name, m.step.against, m.step.label) for m in registry.all_methods() if m.step is not None and m.step.kind == "without"]


def added() -> list[tuple[str, str, str]]:
    """(method with the part, the method without it, label) of the parts off by default, measured by adding them."""
    return [(m.name, m.step.against, m.step.label) for m in registry.all_methods() if m.step is not None and m.step.kind == "with"]


RESAMPLES = 2000
LEVEL = 0.95
SEED = 0
LOCOMO_CUTS = (5, 10, 25)
LME_COLUMNS = (("session", "recall_all@5"), ("turn", "recall_all@5"), ("turn", "recall_all@10"))


@dataclass(frozen=True)
class Difference:
    """Mean of (with the part - without it) over the questions, and its bootstrap interval."""

    difference: float
    low: float
    high: float
    better: int  # questions the part scores higher
    worse: int
    questions: int

    @property
    def outside_noise(self) -> bool:
        return self.low > 0 or self.high < 0


def paired_difference(with_part: Sequence[float], without_part: Sequence[float], resamples: int = RESAMPLES,
                      level: float = LEVEL, seed: int = SEED) -> Difference | None:
    """The paired bootstrap of the mean difference; ``None`` for no questions. The seed is fixed, so
    the same scores always print the same interval."""
    a, b = np.asarray(with_part, dtype=np.float64), np.asarray(without_part, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"paired scores differ in length: {a.size} with the part, {b.size} without")
    if not 0 < level < 1 or resamples < 1:
        raise ValueError(f"level must be in (0, 1) and resamples at least 1, not {level} and {resamples}")
    if a.size == 0:
        return None
    d = a - b
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    step = max(1, 2_000_000 // d.size)  # at most about 16 MB of drawn indices at a time
    for start in range(0, resamples, step):
        stop = min(resamples, start + step)
        means[start:stop] = d[rng.integers(0, d.size, size=(stop - start, d.size))].mean(axis=1)
    tail = (1 - level) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    return Difference(float(d.mean()), float(low), float(high), int((d > 0).sum()), int((d < 0).sum()), int(d.size))


def comparisons(methods: Sequence[str]) -> list[tuple[str, str, str]]:
    """(label, method with the part, method without it): each chained step against the step before
    it, the whole structure (seem against the prior) when steps lie between them, then the parts
    taken away, against the method that has them."""
    steps = chain()
    order = [name for name, _ in steps]
    labels = dict(steps)
    chained = [name for name in order if name in methods]

    def parts(before: str, name: str) -> str:  # a step not run between two that were is part of the change
        return ", ".join(labels[n] for n in order[order.index(before) + 1:order.index(name) + 1])

    out = [(parts(before, name), name, before) for before, name in zip(chained, chained[1:])]
    top, bottom = registry.STRUCTURE
    if bottom in chained and top in chained and chained.index(top) - chained.index(bottom) > 1:
        out.append(("the structure: " + parts(bottom, top), top, bottom))
    top, bottom = registry.STRUCTURE_RERANKED
    if top in methods and bottom in methods:  # the reranker is not the structure's: both sides have one
        out.append(("the structure, both reranked by their own models", top, bottom))
    out += [(label, with_part, name) for name, with_part, label in taken_away() if name in methods and with_part in methods]
    out += [(label, name, without) for name, without, label in added() if name in methods and without in methods]
    return out


def locomo_columns(questions: Sequence[LocomoQuestion]) -> dict[str, list[float | None]]:
    """Per-question scores by the ablation table's columns: R@5 / R@10 / R@25 of all questions, then
    R@10 of each category (``None`` for a question of another category)."""
    if not questions:
        return {}
    cuts = [k for k in LOCOMO_CUTS if f"recall@{k}" in questions[0].scores]
    columns: dict[str, list[float | None]] = {f"recall@{k} all": [q.scores[f"recall@{k}"] for q in questions] for k in cuts}
    k10 = "recall@10" if 10 in cuts else f"recall@{cuts[0]}"
    for cat in sorted({q.category for q in questions}):
        columns[f"{k10} {cat}"] = [q.scores[k10] if q.category == cat else None for q in questions]
    return columns


def longmemeval_columns(per_granularity: Mapping[str, Sequence[tuple[str, dict[str, float]]]]) -> dict[str, list[float | None]]:
    """Session recall_all@5, turn recall_all@5 and @10, then turn recall_all@10 of each question type."""
    columns: dict[str, list[float | None]] = {}
    for g, metric in LME_COLUMNS:
        if per_granularity.get(g):
            columns[f"{g} {metric}"] = [scores[metric] for _, scores in per_granularity[g]]
    turns = per_granularity.get("turn") or []
    for qtype in sorted({t for t, _ in turns}):
        columns[f"turn recall_all@10 {qtype}"] = [scores["recall_all@10"] if t == qtype else None for t, scores in turns]
    return columns


def by_group(with_part: Sequence[float], without_part: Sequence[float], groups: Sequence[str]) -> tuple[int, int]:
    """(groups where the part's mean change is above 0, groups where it is below): does a change hold
    in every conversation, or come from one?"""
    sums: dict[str, float] = {}
    for a, b, g in zip(with_part, without_part, groups, strict=True):
        sums[g] = sums.get(g, 0.0) + a - b
    return sum(1 for v in sums.values() if v > 1e-12), sum(1 for v in sums.values() if v < -1e-12)


def differences(columns: Mapping[str, Mapping[str, Sequence[float | None]]], groups: Sequence[str] | None = None) -> dict:
    """For results.json: every comparison of the methods in ``columns`` (method -> column -> per-question
    scores, the same questions in the same order for every method), per column; with ``groups`` (each
    question's conversation), also the conversations the part moves up and down."""
    rows = []
    for label, with_part, without in comparisons(list(columns)):
        cells = {}
        for column, scores in columns[with_part].items():
            other = columns[without].get(column)
            if other is None:
                continue
            kept = [i for i, (a, b) in enumerate(zip(scores, other, strict=True)) if a is not None and b is not None]
            a, b = [scores[i] for i in kept], [other[i] for i in kept]
            diff = paired_difference(a, b)
            if diff is None:
                continue
            cells[column] = {**asdict(diff), "outside_noise": diff.outside_noise}
            if groups is not None:
                up, down = by_group(a, b, [groups[i] for i in kept])
                cells[column].update(groups_better=up, groups_worse=down, groups=len({groups[i] for i in kept}))
        rows.append({"part": label, "with": with_part, "without": without, "columns": cells})
    return {"method": "paired bootstrap over questions", "resamples": RESAMPLES, "level": LEVEL, "seed": SEED, "rows": rows}
