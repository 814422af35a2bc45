"""What held on a date, and a property's history in words for an answering model.

Pure. Two readings of "on date D": what the memory knew then (rows said by D, their histories
linked from those rows alone: ``held_on``) and, with ``known_then=False``, what is known now to
have held on D (the stored ends, which a later statement may have set).
"""

from __future__ import annotations

from datetime import datetime

import polars as pl

from seem_dagster.graph.entities import normalise
from seem_dagster.properties.derive import as_rows, link
from seem_dagster.schemas import Properties


def known_by(properties: pl.DataFrame, when: datetime, passages: pl.DataFrame | None = None) -> pl.DataFrame:
    """The table as a build on ``when`` would have written it: rows said by then, histories relinked."""
    said = properties.filter(pl.col(Properties.said_at) <= when)
    if said.height == properties.height:
        return properties
    return link(as_rows(said, passages))


def held_on(properties: pl.DataFrame, when: datetime, *, known_then: bool = True, passages: pl.DataFrame | None = None) -> pl.DataFrame:
    """Rows whose value held on ``when``: valid_from <= when < valid_to (or no end yet)."""
    frame = known_by(properties, when, passages) if known_then else properties
    return frame.filter((pl.col(Properties.valid_from) <= when)
                        & (pl.col(Properties.valid_to).is_null() | (pl.col(Properties.valid_to) > when)))


def _day(value: datetime | None) -> str:
    return f"{value:%Y-%m-%d}" if value is not None else "?"


def _stretches(rows: pl.DataFrame) -> list[dict]:
    """The history in valid time as stretches of one value: a restatement extends its stretch."""
    out: list[dict] = []
    for r in rows.sort(Properties.valid_from, Properties.said_at).iter_rows(named=True):
        if out and normalise(out[-1][Properties.value]) == normalise(r[Properties.value]):
            out[-1][Properties.valid_to] = r[Properties.valid_to]
            continue
        out.append(dict(r))
    return out


def history_line(rows: pl.DataFrame, when: datetime) -> str:
    """One (entity, property) history, newest value first, each superseded value with its end:
    "Tomas lives_in: Didsbury since 2024-09-01 (said 2024-10-20); earlier Chorlton from 2024-03-02 until 2024-09-01"."""
    parts = []
    for r in reversed(_stretches(rows)):
        value, start, said = r[Properties.value], _day(r[Properties.valid_from]), _day(r[Properties.said_at])
        if r[Properties.valid_to] is not None:
            parts.append(f"{value} from {start} until {_day(r[Properties.valid_to])}")
        elif r[Properties.valid_from] > when:
            parts.append(f"{value} from {start} (planned; said {said})")
        else:
            parts.append(f"{value} since {start} (said {said})")
    first = rows.row(0, named=True)
    head, rest = parts[0], parts[1:]
    return f"{first[Properties.entity]} {first[Properties.property]}: {head}" + (f"; earlier {'; '.join(rest)}" if rest else "")


def history_lines(properties: pl.DataFrame, passage_ids: list[str], when: datetime, *, limit: int,
                  passages: pl.DataFrame | None = None) -> list[str]:
    """The histories of the single-valued properties the given passages state, as known on ``when``:
    what an answering model needs to tell the current value from a superseded one."""
    if properties is None or properties.height == 0 or limit <= 0:
        return []
    known = known_by(properties, when, passages).filter(pl.col(Properties.single_valued))
    touched = known.filter(pl.col(Properties.passage_id).is_in(passage_ids)).select(Properties.entity_id, Properties.property).unique(
        maintain_order=True)
    lines = []
    for eid, prop in touched.iter_rows():
        rows = known.filter((pl.col(Properties.entity_id) == eid) & (pl.col(Properties.property) == prop))
        lines.append(history_line(rows, when))
        if len(lines) >= limit:
            break
    return lines
