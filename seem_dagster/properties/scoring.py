"""Property extraction against a hand-labelled list: precision, recall, and how well times and
histories come out (what `benchmarks/property_extraction.py` prints).

Pure. A predicted row matches a gold row of the same turn when the entity is the same (normalised,
or one name contains the other), the property is the same (after the vocabulary's canonical names,
or one of the gold row's ``accept`` names, or a shared content word once -ed/-ing/-s are cut) and
the values agree (normalised, one contains the other, or half their words shared). Rows are paired
one to one, best first. Times are scored on the matched rows whose gold row gives one: a gold date
or interval ("2024-05-20/2024-05-26") contains the predicted day.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date, datetime

from seem_dagster.graph.entities import normalise
from seem_dagster.properties.vocabulary import canonical_name

_FILLER = frozenset("a an the of to in on at for and with from by is be was were my his her their our your".split())


@dataclass(frozen=True)
class Gold:
    turn: str
    entity: str
    property: str
    value: str
    valid_from: str | None = None
    valid_to: str | None = None
    single_valued: bool = False
    accept: tuple[str, ...] = ()


@dataclass(frozen=True)
class Predicted:
    turn: str
    entity: str
    property: str
    value: str
    valid_from: datetime
    valid_to: datetime | None
    single_valued: bool


@dataclass
class Scores:
    gold: int
    predicted: int
    matched: int
    precision: float
    recall: float
    f1: float
    dated: int  # matched rows whose gold row gives valid_from
    valid_from_correct: int
    ended: int  # matched rows whose gold row gives valid_to (a superseded value)
    valid_to_correct: int
    single_valued_agree: int
    pairs: list[tuple[Gold, Predicted]] = field(default_factory=list)
    missed: list[Gold] = field(default_factory=list)
    extra: list[Predicted] = field(default_factory=list)


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def _words(text: str) -> set[str]:
    return {_stem(w) for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in _FILLER}


def same_entity(a: str, b: str) -> bool:
    x, y = normalise(a), normalise(b)
    return x == y or f" {x} " in f" {y} " or f" {y} " in f" {x} "


def same_property(gold: Gold, predicted: str) -> bool:
    names = {canonical_name(gold.property), *(canonical_name(a) for a in gold.accept)}
    if canonical_name(predicted) in names:
        return True
    return bool(_words(gold.property.replace("_", " ")) & _words(predicted.replace("_", " ")))


def same_value(a: str, b: str) -> bool:
    x, y = normalise(a), normalise(b)
    if x == y or (x and y and (x in y or y in x)):
        return True
    wa, wb = _words(a), _words(b)
    return bool(wa and wb) and len(wa & wb) / len(wa | wb) >= 0.5


def _span(text: str) -> tuple[date, date]:
    start, _, end = text.partition("/")
    return date.fromisoformat(start), date.fromisoformat(end or start)


def within(gold: str, when: datetime | None) -> bool:
    if when is None:
        return False
    start, end = _span(gold)
    return start <= when.date() <= end


def score(gold: list[Gold], predicted: list[Predicted]) -> Scores:
    pairs: list[tuple[Gold, Predicted]] = []
    used: set[int] = set()
    for g in gold:
        candidates = [i for i, p in enumerate(predicted) if i not in used and p.turn == g.turn and same_entity(g.entity, p.entity)
                      and same_property(g, p.property) and same_value(g.value, p.value)]
        if candidates:
            used.add(candidates[0])
            pairs.append((g, predicted[candidates[0]]))
    matched = len(pairs)
    precision = matched / len(predicted) if predicted else 0.0
    recall = matched / len(gold) if gold else 0.0
    dated = [(g, p) for g, p in pairs if g.valid_from]
    ended = [(g, p) for g, p in pairs if g.valid_to]
    found = {id(g) for g, _ in pairs}
    return Scores(
        len(gold), len(predicted), matched, precision, recall,
        2 * precision * recall / (precision + recall) if precision + recall else 0.0,
        len(dated), sum(within(g.valid_from, p.valid_from) for g, p in dated),
        len(ended), sum(within(g.valid_to, p.valid_to) for g, p in ended),
        sum(g.single_valued == p.single_valued for g, p in pairs),
        pairs, [g for g in gold if id(g) not in found], [p for i, p in enumerate(predicted) if i not in used],
    )
