"""Which turns a forget request names (pure): by the id its input gave a turn or by passage id, by
session, by speaker, before a date; the criteria given all hold at once, and none given names the
whole conversation."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

import polars as pl

from seem_dagster.schemas import Passages

MAX_TURNS = 10_000  # turn ids one request may name
MAX_ID_CHARS = 200


class ForgetError(ValueError):
    """A request that names nothing, or something the conversation does not hold: one line, nothing changed."""


@dataclass(frozen=True)
class Selection:
    turns: tuple[str, ...] = ()
    session_id: str | None = None
    speaker: str | None = None
    before: datetime | None = None  # turns said strictly before this moment

    @property
    def whole(self) -> bool:
        return not (self.turns or self.session_id is not None or self.speaker is not None or self.before is not None)

    def describe(self) -> str:
        parts = []
        if self.turns:
            shown = ", ".join(self.turns[:5]) + (f" and {len(self.turns) - 5} more" if len(self.turns) > 5 else "")
            parts.append(f"turns {shown}")
        if self.session_id is not None:
            parts.append(f"session {self.session_id}")
        if self.speaker is not None:
            parts.append(f"speaker {self.speaker}")
        if self.before is not None:
            parts.append(f"before {self.before.isoformat(sep=' ')}")
        return "; ".join(parts) or "the whole conversation"


def _clean(value: object, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ForgetError(f"{name} must be non-empty text, got {type(value).__name__ if not isinstance(value, str) else 'empty text'}")
    if len(value) > MAX_ID_CHARS:
        raise ForgetError(f"{name} is {len(value)} characters, over the limit of {MAX_ID_CHARS}")
    return value


def selection(turns=None, session_id=None, speaker=None, before: datetime | None = None) -> Selection:
    """A request's criteria, checked for shape (text, lengths, counts)."""
    if turns is not None and isinstance(turns, str):
        turns = [turns]
    if turns is not None and (isinstance(turns, bytes | dict) or not isinstance(turns, Iterable)):
        raise ForgetError(f"turns must be a turn id or a list of turn ids (text), got {type(turns).__name__}")
    if turns is not None:
        turns = list(itertools.islice(turns, MAX_TURNS + 1))
    named = tuple(_clean(t, "a turn id") for t in (turns or ()))
    if len(named) > MAX_TURNS:
        raise ForgetError(f"{len(named)} turn ids in one request, over the limit of {MAX_TURNS}")
    if turns is not None and not named:
        raise ForgetError("turns is empty: name at least one turn, or leave it out to forget by session, speaker or date")
    return Selection(tuple(dict.fromkeys(named)), None if session_id is None else _clean(session_id, "session_id"),
                     None if speaker is None else _clean(speaker, "speaker"), before)


def select(passages: pl.DataFrame, chosen: Selection, conversation_id: str, already: frozenset[str] = frozenset(),
           forgotten_name=lambda kind, value: False) -> pl.DataFrame:
    """The passages ``chosen`` names. ``already``: ids (input ids and passage ids) of turns forgotten
    before, which a request may name again (a retry) and which select nothing; ``forgotten_name(kind,
    value)``: whether a forgotten turn had this speaker or session. Raises ForgetError for a turn,
    session or speaker the conversation never held; a request whose criteria all exist but match no
    turn left (a retry, a date policy run again) selects no row."""
    rows = passages
    if chosen.turns:
        by_ref = set(passages[Passages.source_ref].to_list())
        by_id = set(passages[Passages.passage_id].to_list())
        unknown = [t for t in chosen.turns if t not in by_ref and t not in by_id and t not in already]
        if unknown:
            more = f" (and {len(unknown) - 1} more)" if len(unknown) > 1 else ""
            raise ForgetError(f"turn {unknown[0]!r}{more} is not in conversation {conversation_id!r}: name a turn by the id its "
                              "input gave it (LoCoMo's D1:3, a JSONL line's id) or by its passage id")
        wanted = list(chosen.turns)
        rows = rows.filter(pl.col(Passages.source_ref).is_in(wanted) | pl.col(Passages.passage_id).is_in(wanted))
    if chosen.session_id is not None:
        if chosen.session_id not in set(passages[Passages.session_id].to_list()) and not forgotten_name("session", chosen.session_id):
            raise ForgetError(f"session {chosen.session_id!r} is not in conversation {conversation_id!r}")
        rows = rows.filter(pl.col(Passages.session_id) == chosen.session_id)
    if chosen.speaker is not None:
        if chosen.speaker not in set(passages[Passages.speaker].to_list()) and not forgotten_name("speaker", chosen.speaker):
            raise ForgetError(f"speaker {chosen.speaker!r} has no turn in conversation {conversation_id!r}")
        rows = rows.filter(pl.col(Passages.speaker) == chosen.speaker)
    if chosen.before is not None:
        rows = rows.filter(pl.col(Passages.timestamp) < chosen.before)
    return rows
