"""Turns given to `Memory.add` -> lines of the store's input log, validated as JSONL input is.

Each turn becomes the JSON object a JSONL input line holds, and the lines go through the JSONL
reader itself, so a turn is refused with the same one-line errors as a line of a file (naming the
turn and the field), before anything is written.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, is_dataclass
from datetime import datetime, timezone

from seem_dagster.config import IngestConfig
from seem_dagster.ingest import jsonl
from seem_dagster.ingest.errors import InputError, unknown_field
from seem_dagster.memory.records import Turn
from seem_dagster.store.keys import InvalidConversationId, check_conversation_id

FIELDS = ("speaker", "text", "timestamp", "id")
# What each field may be given as, for the refusal of anything else (bytes, a set, an object).
KINDS = {"speaker": "string", "text": "string", "timestamp": "ISO text or a datetime", "id": "string or integer"}
MAX_TURNS = 10_000  # turns in one call


def _as_dict(turn: object, at: str) -> dict:
    if isinstance(turn, Turn) or is_dataclass(turn):
        return {k: v for k, v in asdict(turn).items() if v is not None}
    if isinstance(turn, Mapping):
        unknown = unknown_field(turn, FIELDS, "a turn")
        if unknown is not None:
            raise InputError(at, None, *unknown)
        return dict(turn)
    raise InputError(at, None, None, f"expected a dict or a Turn, got {type(turn).__name__}")


def _stamp(value: object, now: datetime) -> object:
    if value is None:
        return now.isoformat(timespec="seconds")
    if isinstance(value, datetime):
        return value.isoformat()
    return value  # the reader says what is wrong with anything else


def _line(obj: dict, at: str) -> str:
    """The JSONL line of one turn. A value JSON cannot hold (bytes, a set, a date without its time) is
    refused naming its field, never written as its Python form."""
    for field, value in obj.items():
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            raise InputError(at, None, field, f"expected {KINDS.get(field, 'a JSON value')}, got {type(value).__name__}") from None
    return json.dumps(obj, ensure_ascii=False)


def session_of(timestamp: str) -> str:
    """The default session: the turn's UTC day, so a day's turns form one session."""
    from seem_dagster.ingest.dates import parse_iso

    return parse_iso(timestamp).date().isoformat()


def to_lines(conversation_id: str, turns: Iterable, session_id: str | None, options: IngestConfig,
             now: datetime | None = None) -> list[str]:
    """The log lines of ``turns``; raises InputError naming the turn (1-based) and the field."""
    label = f"add to {conversation_id!r}"
    try:
        check_conversation_id(conversation_id)
    except InvalidConversationId as err:
        raise InputError("add", None, "conversation_id", str(err)) from None
    if isinstance(turns, Mapping | Turn | str):
        turns = [turns]  # one turn given alone
    turns = list(turns)
    if not turns:
        raise InputError(label, None, None, "no turns given")
    if len(turns) > MAX_TURNS:
        raise InputError(label, None, None, f"{len(turns)} turns in one call, over the limit of {MAX_TURNS}: add them in parts")
    if session_id is not None and (not isinstance(session_id, str) or not session_id.strip()):
        raise InputError(label, None, "session_id", "must be non-empty text")
    now = now or datetime.now(timezone.utc).replace(microsecond=0)
    lines = []
    for n, turn in enumerate(turns, start=1):
        obj = _as_dict(turn, f"{label}: turn {n}")
        obj["timestamp"] = _stamp(obj.get("timestamp"), now)
        session = session_id
        if session is None:
            try:
                session = session_of(obj["timestamp"]) if isinstance(obj["timestamp"], str) else "turns"
            except ValueError:
                session = "turns"  # the reader refuses the timestamp below, naming the turn
        lines.append(_line({"conversation_id": conversation_id, "session_id": session, **obj}, f"{label}: turn {n}"))
    try:
        jsonl.read("\n".join(lines), label, options)
    except InputError as err:  # "line N" of these lines is the call's turn N
        record = err.record.replace("line ", "turn ", 1) if err.record else None
        raise InputError(err.file, record, err.field, err.problem) from None
    return lines
