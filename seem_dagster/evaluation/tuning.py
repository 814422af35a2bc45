"""Settings chosen on some conversations and scored on another (pure).

A setting tuned on the dev conversations fits them as well as the method, and the figures are also
checked on conversations nobody tuned on. ``nested`` estimates what tuning is worth there: it holds
each conversation out in turn, chooses the settings on the others by coordinate ascent from the
defaults over a grid, and scores the held-out conversation with the defaults and with the settings
chosen without it. A gain that holds out is the method's; one that does not was fitted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

# settings changed from the defaults -> one (conversation, score) per question, in a fixed order
Scores = Callable[[Mapping[str, object]], Sequence[tuple[str, float]]]

# Two settings closer than this on the training questions are a tie, and a tie keeps the defaults.
TIE = 1e-9


@dataclass(frozen=True)
class Fold:
    held_out: str
    chosen: dict[str, object]  # the settings chosen on the other conversations, as changes from the defaults
    questions: int
    default: float  # mean score of the held-out conversation's questions with the defaults
    tuned: float  # the same with the chosen settings


def memoised(scores: Scores) -> Scores:
    """``scores`` computed once per distinct set of changes (each evaluation ranks every question)."""
    seen: dict[tuple, Sequence[tuple[str, float]]] = {}

    def cached(changes: Mapping[str, object]) -> Sequence[tuple[str, float]]:
        key = tuple(sorted(changes.items()))
        if key not in seen:
            seen[key] = scores(dict(changes))
        return seen[key]

    cached.evaluated = seen  # type: ignore[attr-defined]
    return cached


def mean_score(rows: Sequence[tuple[str, float]], keep: Callable[[str], bool]) -> float:
    """Mean over the questions of the conversations ``keep`` accepts (every question weighs the same)."""
    values = [score for conversation, score in rows if keep(conversation)]
    if not values:
        raise ValueError("no question to score: every conversation was left out")
    return sum(values) / len(values)


def ascend(scores: Scores, grid: Mapping[str, Sequence[object]], defaults: Mapping[str, object],
           keep: Callable[[str], bool], passes: int = 3) -> dict[str, object]:
    """Coordinate ascent from the defaults: each setting in turn takes the value of its grid that
    scores best on the kept conversations, the others held; repeated until a pass changes nothing
    (at most ``passes``). Only a strictly better score moves a setting."""
    unknown = sorted(set(grid) - set(defaults))
    if unknown:
        raise ValueError(f"no default for setting(s) {', '.join(unknown)}")
    chosen: dict[str, object] = {}
    best = mean_score(scores(chosen), keep)
    for _ in range(passes):
        moved = False
        for name, values in grid.items():
            for value in values:
                trial = {k: v for k, v in {**chosen, name: value}.items() if v != defaults[k]}
                score = mean_score(scores(trial), keep)
                if score > best + TIE:
                    chosen, best, moved = trial, score, True
        if not moved:
            break
    return chosen


def nested(scores: Scores, grid: Mapping[str, Sequence[object]], defaults: Mapping[str, object], passes: int = 3) -> list[Fold]:
    """One fold per conversation (in the order of the questions): settings chosen on the others,
    both the defaults and them scored on it."""
    rows = scores({})
    conversations = list(dict.fromkeys(conversation for conversation, _ in rows))
    if len(conversations) < 2:
        raise ValueError(f"holding one conversation out needs questions of two or more; these are of {len(conversations)}")
    folds = []
    for held in conversations:
        chosen = ascend(scores, grid, defaults, held.__ne__, passes)
        folds.append(Fold(held, chosen, sum(1 for c, _ in rows if c == held), mean_score(rows, held.__eq__),
                          mean_score(scores(chosen), held.__eq__)))
    return folds


def pooled(folds: Sequence[Fold]) -> tuple[float, float]:
    """(defaults, tuned) over every held-out question: each fold weighs by its questions."""
    total = sum(f.questions for f in folds)
    return (sum(f.default * f.questions for f in folds) / total, sum(f.tuned * f.questions for f in folds) / total)
