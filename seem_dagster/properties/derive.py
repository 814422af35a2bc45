"""Facts (or a model's stated properties) -> the properties table, each single-valued history linked.

Pure. A row is content-addressed (its id hashes the passage, its position there, the entity,
property, value, type and both times), so rebuilding the same input gives the same rows, and a new
session only adds rows and closes the ones it supersedes: the history already written is never
rewritten (``compare`` reports what a build added and closed, and anything that vanished).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

import polars as pl

from seem_dagster import ids
from seem_dagster.graph.entities import entity_id, normalise
from seem_dagster.properties.stated import StatedProperty
from seem_dagster.properties.vocabulary import NUMBER_WORDS, canonical_name, is_single_valued, name_property
from seem_dagster.schemas import Facts, Passages, Properties, table

LLM_SOURCE = "llm"
_ISO_START = re.compile(r"^(\d{4})(?:-(\d{2})(?:-(\d{2}))?)?(?:$|/|T| )")
_NUMBER = re.compile(r"^-?\d+(?:\.\d+)?$")
_BOOLEAN = {"true": "true", "yes": "true", "false": "false", "no": "false"}
# Columns a later build may change on an existing row: only its end and what supersedes it.
LINKS = (Properties.valid_to, Properties.supersedes)


def start_of(time: str | None) -> datetime | None:
    """An ISO date, month, year or interval ("2024-05-01/2024-05-31") -> the datetime it starts; None if
    absent or unreadable."""
    match = _ISO_START.match((time or "").strip())
    if not match:
        return None
    year, month, day = match.groups()
    try:
        return datetime(int(year), int(month or 1), int(day or 1))
    except ValueError:
        return None


def typed_value(value: str, declared: str | None = None) -> tuple[str, str]:
    """(value as stored, dtype). A declared type is kept only when the value reads as one; numbers
    are written in digits, booleans as true/false, dates as ISO."""
    text = " ".join(value.split())
    low = text.lower()
    if declared in (None, "boolean") and low in _BOOLEAN:
        return _BOOLEAN[low], "boolean"
    if declared in (None, "number"):
        if _NUMBER.match(text):
            return text, "number"
        if low in NUMBER_WORDS:
            return str(NUMBER_WORDS[low]), "number"
    if start_of(text) is not None and (len(text) == 10 or declared == "date" and len(text) in (4, 7)):
        return text, "date"
    return text, "string"


def _row(cid: str, pid: str, ordinal: int, entity: str, prop: str, value: str, dtype: str, single: bool,
         valid_from: datetime, said_at: datetime, source: str) -> dict:
    eid = entity_id(cid, normalise(entity))
    key = ids.stable_hash("property", pid, ordinal, eid, prop, value, dtype, valid_from.isoformat(), said_at.isoformat())
    return {
        Properties.property_id: "v_" + key, Properties.conversation_id: cid, Properties.entity: entity.strip(),
        Properties.entity_id: eid, Properties.property: prop, Properties.value: value, Properties.dtype: dtype,
        Properties.single_valued: single, Properties.valid_from: valid_from, Properties.valid_to: None,
        Properties.said_at: said_at, Properties.passage_id: pid, Properties.supersedes: None, Properties.source: source,
        "_order": None,
    }


def candidates(facts: pl.DataFrame, passages: pl.DataFrame, stated: Mapping[str, Sequence[StatedProperty]] | None = None,
               *, first_ordinal: int = 0, first_position: int = 0) -> list[dict]:
    """One row per fact that names a property, or per stated property where a model stated them
    (``stated`` maps passage id -> its properties; a passage absent from it is derived from its facts).
    ``first_ordinal``, ``first_position``: where ``facts`` and ``passages`` start in the whole
    conversation's tables, when they are its last rows (an append derives its new turns' rows alone,
    and a row's id hashes its fact's place in the whole facts table)."""
    stated = stated or {}
    said = dict(zip(passages[Passages.passage_id].to_list(), passages[Passages.timestamp].to_list()))
    ordered = passages.sort(Passages.session_index, Passages.turn_index)[Passages.passage_id].to_list()
    position = {p: first_position + i for i, p in enumerate(ordered)}
    rows = []
    for pid, items in stated.items():
        if pid not in said:
            continue
        for ordinal, item in enumerate(items):
            name, value = canonical_name(item.property), item.value.strip()
            if not (name and value and item.entity.strip()):
                continue
            value, dtype = typed_value(value, item.dtype)
            row = _row(passages[Passages.conversation_id][0], pid, ordinal, item.entity, name, value, dtype, is_single_valued(name),
                       start_of(item.time) or said[pid], said[pid], LLM_SOURCE)
            row["_order"] = (position[pid], ordinal)
            rows.append(row)
    for ordinal, fact in enumerate(facts.iter_rows(named=True), start=first_ordinal):
        pid = fact[Facts.passage_id]
        if pid in stated or pid not in said:
            continue
        named = name_property(fact[Facts.relation], fact[Facts.object])
        if named is None or not named.value:
            continue
        value, dtype = (named.value, named.dtype) if named.dtype else typed_value(named.value)
        row = _row(fact[Facts.conversation_id], pid, ordinal, fact[Facts.subject], named.property, value, dtype, named.single_valued,
                   start_of(fact[Facts.time]) or said[pid], said[pid], fact[Facts.fact_id])
        row["_order"] = (position[pid], ordinal)
        rows.append(row)
    return rows


def _same(a: str, b: str) -> bool:
    return normalise(a) == normalise(b)


def link(rows: list[dict]) -> pl.DataFrame:
    """Each single-valued (entity, property) history in time order (valid_from, then when it was said):
    the first row of a new value supersedes the first row of the value before, and every row of the
    earlier value ends where the new one starts. A restatement of the current value supersedes nothing."""
    rows = [dict(r) for r in rows]
    chains: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        if r[Properties.single_valued]:
            chains.setdefault((r[Properties.entity_id], r[Properties.property]), []).append(r)
    for chain in chains.values():
        chain.sort(key=lambda r: (r[Properties.valid_from], r[Properties.said_at], r["_order"]))
        run: list[dict] = []  # the rows of the value that holds
        for r in chain:
            if run and not _same(r[Properties.value], run[0][Properties.value]):
                for old in run:
                    old[Properties.valid_to] = r[Properties.valid_from]
                r[Properties.supersedes] = run[0][Properties.property_id]
                run = []
            run.append(r)
    rows.sort(key=lambda r: r["_order"])
    for r in rows:
        del r["_order"]
    return table(Properties, rows)


def derive_properties(facts: pl.DataFrame, passages: pl.DataFrame, stated: Mapping[str, Sequence[StatedProperty]] | None = None) -> pl.DataFrame:
    return link(candidates(facts, passages, stated))


def as_rows(frame: pl.DataFrame, passages: pl.DataFrame) -> list[dict]:
    """Stored rows back into ``link``'s input (time travel relinks the rows known on a date)."""
    ordered = passages.sort(Passages.session_index, Passages.turn_index)[Passages.passage_id].to_list() if passages is not None else []
    position = {p: i for i, p in enumerate(ordered)}
    out = []
    for i, r in enumerate(frame.iter_rows(named=True)):
        r = {**r, Properties.valid_to: None, Properties.supersedes: None}
        r["_order"] = (position.get(r[Properties.passage_id], len(position)), i)
        out.append(r)
    return out


@dataclass(frozen=True)
class HistoryReport:
    kept: int  # rows of the previous build, unchanged
    appended: int  # new rows
    closed: int  # earlier rows that now have an end (superseded by a new value)
    withdrawn: int  # earlier rows no longer derived (their input changed: a rebuild, not an append)

    @property
    def append_only(self) -> bool:
        return self.withdrawn == 0


def compare(previous: pl.DataFrame | None, current: pl.DataFrame) -> HistoryReport:
    if previous is None or previous.height == 0:
        return HistoryReport(0, current.height, 0, 0)
    before = {r[Properties.property_id]: r for r in previous.iter_rows(named=True)}
    now = {r[Properties.property_id]: r for r in current.iter_rows(named=True)}
    kept = [pid for pid in before if pid in now]
    closed = sum(1 for pid in kept if before[pid][Properties.valid_to] is None and now[pid][Properties.valid_to] is not None)
    return HistoryReport(len(kept), len(set(now) - set(before)), closed, len(set(before) - set(now)))
