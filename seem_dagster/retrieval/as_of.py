"""Answering as of a date: the memory as it stood then, and the property histories in the context.

``restrict`` keeps the turns said by the date (and the seed facts from them): the ranking of a
memory built from only those turns is approximated by dropping the later ones from this one, so the
walk itself still crosses later turns. ``property_histories`` gives the histories of the single-valued
properties the chosen turns state, current value first and each superseded value with its end, as
known on the date: what lets an answering model tell "lived in Chorlton until 2024-09" from now.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, time

from seem_dagster.properties.as_of import history_lines
from seem_dagster.retrieval.index import MemoryIndex
from seem_dagster.retrieval.search import RetrievalResult
from seem_dagster.schemas import Passages


def parse_as_of(text: str) -> datetime:
    """An ISO date (the whole day counts) or date-time. Raises ValueError."""
    value = datetime.fromisoformat(text)
    if len(text.strip()) == 10:  # a day: everything said that day is known "as of" it
        value = datetime.combine(value.date(), time.max)
    return value


def said_by(index: MemoryIndex, when: datetime) -> set[str]:
    ts = dict(zip(index.passages[Passages.passage_id].to_list(), index.passages[Passages.timestamp].to_list()))
    return {p for p, t in ts.items() if t <= when}


def restrict(index: MemoryIndex, result: RetrievalResult, when: datetime) -> RetrievalResult:
    known = said_by(index, when)
    return replace(result, ranked=[r for r in result.ranked if r.passage_id in known],
                   seeds=[s for s in result.seeds if s.passage_id in known])


# Property histories are drawn from the turns of the ranking's head: those the context will hold.
HISTORY_TURNS = 20


def property_histories(index: MemoryIndex, ranked: list[str], when: datetime, limit: int) -> tuple[str, list[str]] | None:
    """The histories the top turns state, as a context section: (header, lines), or None."""
    if index.properties is None or not limit:
        return None
    lines = history_lines(index.properties, ranked[:HISTORY_TURNS], when, limit=limit, passages=index.passages)
    if not lines:
        return None
    return (f"## What held as of {when:%Y-%m-%d} (property histories: current value first, superseded ones with their end)",
            [f"- {line}" for line in lines])
