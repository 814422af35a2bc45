"""Generic JSONL chat logs: one message per line.

Each line is a JSON object::

    {"conversation_id": "c1", "session_id": "s1", "timestamp": "2024-03-02T19:05:00",
     "speaker": "Priya", "text": "...", "id": "optional, unique in the conversation"}

Sessions are ordered by their earliest timestamp, turns within a session by line order. ``id``
becomes ``source_ref``; without it, ``source_ref`` is ``<session_id>:<turn index>``.
A line with another field is refused (a misspelt ``speaker`` must not vanish), as is an ``id`` that
is empty or blank.

Questions (optional, ``--questions``) use the same one-object-per-line form::

    {"question_id": "q1", "conversation_id": "c1", "question": "...", "question_date": "2024-04-01",
     "answer": "...", "category": "...", "evidence": ["<id of a gold turn>", ...]}
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from datetime import datetime

import polars as pl

from seem_dagster.config import IngestConfig
from seem_dagster.ingest import dates
from seem_dagster.ingest.conversation import Conversation, ConversationBuilder
from seem_dagster.ingest.errors import InputError, Located
from seem_dagster.schemas import Passages
from seem_dagster.store.files import jsonl_lines
from seem_dagster.store.keys import InvalidConversationId, check_conversation_id

FORMAT = "jsonl"
# The fields a line may have; any other is refused, as `Memory.add` refuses it in a turn.
FIELDS = ("conversation_id", "session_id", "timestamp", "speaker", "text", "id")
QUESTION_FIELDS = ("question_id", "conversation_id", "question", "question_date", "answer", "category", "evidence")


def _objects(text: str, file: str, first_line: int = 1) -> Iterator[tuple[int, Located, dict]]:
    for line_no, line in enumerate(jsonl_lines(text), start=first_line):
        if not line.strip():
            continue
        at = Located(file, f"line {line_no}")
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as err:
            raise at.fail(None, f"malformed JSON at column {err.colno}: {err.msg}") from None
        if not isinstance(obj, dict):
            raise at.fail(None, "expected a JSON object")
        yield line_no, at, obj


def _timestamp(at: Located, obj: dict, field: str, *, optional: bool = False) -> datetime | None:
    value = at.require(obj, field, str, optional=optional)
    if value is None:
        return None
    try:
        return dates.parse_iso(value)
    except dates.DateOutOfRange as err:
        raise at.fail(field, str(err)) from None
    except ValueError:
        raise at.fail(field, f"unparseable date {value!r} (expected ISO 8601, e.g. 2024-03-02T19:05:00)") from None


def _conversation_id(at: Located, obj: dict) -> str:
    cid = at.require(obj, "conversation_id", str)
    try:
        return check_conversation_id(cid)
    except InvalidConversationId as err:
        raise at.fail("conversation_id", str(err)) from None


def _turn(at: Located, obj: dict, options: IngestConfig) -> tuple[str, str, str, datetime, str | None, str | None]:
    """A line's (conversation, session, speaker, timestamp, id, text), validated; text None: an empty
    turn to skip (``ingest.allow_empty_turns``)."""
    at.only(obj, FIELDS, "a line")
    cid = _conversation_id(at, obj)
    session_id = at.text(obj, "session_id")
    speaker = at.text(obj, "speaker")
    timestamp = _timestamp(at, obj, "timestamp")
    msg_id = at.identifier(obj, "id", (str, int), optional=True)
    try:
        body = at.text(obj, "text", max_chars=options.max_turn_chars)
    except InputError as err:
        if err.problem != "empty text" or not options.allow_empty_turns:
            raise
        body = None
    return cid, session_id, speaker, timestamp, None if msg_id is None else str(msg_id), body


def read(text: str, file: str, options: IngestConfig) -> list[Conversation]:
    # conversation -> session -> [(line, at, speaker, text, timestamp, id)]
    grouped: dict[str, dict[str, list[tuple]]] = {}
    ids_seen: dict[tuple[str, str], int] = {}
    skipped: dict[str, list[str]] = {}
    for line_no, at, obj in _objects(text, file):
        cid, session_id, speaker, timestamp, msg_id, body = _turn(at, obj, options)
        if body is None:
            skipped.setdefault(cid, []).append(f"{at.record}: empty text")
            grouped.setdefault(cid, {})  # a conversation whose every turn is empty is still reported
            continue
        if msg_id is not None:
            if (cid, msg_id) in ids_seen:
                raise at.fail("id", f"duplicate id {msg_id!r} (also line {ids_seen[(cid, msg_id)]})")
            ids_seen[(cid, msg_id)] = line_no
        grouped.setdefault(cid, {}).setdefault(session_id, []).append((line_no, speaker, body, timestamp, msg_id))
    if not any(grouped.values()):
        raise InputError(file, None, None, "no messages found" + (" (every message is empty)" if grouped else ""))

    conversations = []
    for cid, sessions in grouped.items():
        builder = ConversationBuilder(cid, file, FORMAT)
        builder.skipped.extend(skipped.get(cid, []))
        order = sorted(sessions, key=lambda s: (min(t[3] for t in sessions[s]), sessions[s][0][0]))
        refs: dict[str, tuple[int, bool]] = {}  # source ref -> (line, whether its `id` gave it)
        for session_index, session_id in enumerate(order):
            for turn_index, (line_no, speaker, body, timestamp, msg_id) in enumerate(sessions[session_id]):
                ref = msg_id if msg_id is not None else f"{session_id}:{turn_index}"
                if ref in refs:
                    raise _ref_clash(file, ref, (line_no, msg_id is not None), refs[ref])
                refs[ref] = (line_no, msg_id is not None)
                builder.add_turn(
                    session_id=session_id, session_index=session_index, turn_index=turn_index,
                    speaker=speaker, text=body, timestamp=timestamp, source_ref=ref,
                )
        conversations.append(builder.build())
    return conversations


def extend(previous: list[Conversation], text: str, first_line: int, file: str, options: IngestConfig) -> list[Conversation] | None:
    """``read`` of a file whose earlier lines ``previous`` is the parse of and whose next lines are
    ``text`` (from line ``first_line``), reading only those: what an add to the store's input log
    needs. None when only ``read`` of the whole file can tell (the lines are not one conversation's
    turns, each with an ``id`` the file does not hold yet, in its last session or in later ones; an
    empty turn; an earlier file with skipped turns or questions): the caller reads the whole file."""
    if len(previous) != 1 or previous[0].skipped or not previous[0].questions.is_empty() or previous[0].passages.is_empty():
        return None
    (conv,) = previous
    old = conv.passages
    last = old.row(old.height - 1, named=True)
    last_session, sessions = last[Passages.session_id], last[Passages.session_index] + 1
    last_start = old.filter(pl.col(Passages.session_id) == last_session)[Passages.timestamp].min()
    turns_in_last = old.filter(pl.col(Passages.session_id) == last_session).height
    new: dict[str, list[tuple]] = {}
    seen: dict[str, int] = {}
    for line_no, at, obj in _objects(text, file, first_line):
        cid, session_id, speaker, timestamp, msg_id, body = _turn(at, obj, options)
        if cid != conv.conversation_id or body is None or msg_id is None:
            return None
        if msg_id in seen:
            raise at.fail("id", f"duplicate id {msg_id!r} (also line {seen[msg_id]})")
        seen[msg_id] = line_no
        new.setdefault(session_id, []).append((speaker, body, timestamp, msg_id))
    if not new or old[Passages.source_ref].is_in(list(seen)).any():
        return None  # an id the file holds already: read names both lines
    known = set(old[Passages.session_id].unique().to_list())
    if any(s in known and s != last_session for s in new):
        return None  # a turn of an earlier session: the sessions after it move
    if last_session in new and min(t[2] for t in new[last_session]) < last_start:
        return None  # the last session would start earlier: the order of sessions may change
    later = [s for s in new if s != last_session]
    if any(min(t[2] for t in new[s]) < last_start for s in later):
        return None  # a new session starting before the last one: it goes between
    builder = ConversationBuilder(conv.conversation_id, conv.source_file, conv.source_format)
    for turn_index, (speaker, body, timestamp, msg_id) in enumerate(new.get(last_session, []), start=turns_in_last):
        builder.add_turn(session_id=last_session, session_index=sessions - 1, turn_index=turn_index, speaker=speaker, text=body,
                         timestamp=timestamp, source_ref=msg_id)
    # later sessions in read's order: by their first timestamp, then their first line (the order met here)
    for session_index, session_id in enumerate(sorted(later, key=lambda s: min(t[2] for t in new[s])), start=sessions):
        for turn_index, (speaker, body, timestamp, msg_id) in enumerate(new[session_id]):
            builder.add_turn(session_id=session_id, session_index=session_index, turn_index=turn_index, speaker=speaker, text=body,
                             timestamp=timestamp, source_ref=msg_id)
    added = builder.build()
    extended = dataclasses.replace(conv, passages=pl.concat([old, added.passages]), skipped=[])
    extended.extend_fingerprint(conv, added.passages)
    return [extended]


def _ref_clash(file: str, ref: str, this: tuple[int, bool], other: tuple[int, bool]) -> InputError:
    """Explicit ids are unique (checked on reading), and generated refs ("<session>:<turn>") are too, so
    a clash is always an `id` equal to another line's generated ref: name the line that has the `id`."""
    (id_line, _), (generated_line, _) = (this, other) if this[1] else (other, this)
    return InputError(file, f"line {id_line}", "id", f"{ref!r} is also the source ref generated for line {generated_line} "
                      f"(its session_id and turn number; that line has no id): choose another id, or give line {generated_line} one")


def read_questions(text: str, file: str, conversations: list[Conversation]) -> None:
    """Attach questions to their conversations; evidence must name existing turns."""
    by_id = {c.conversation_id: c for c in conversations}
    rows: dict[str, list[dict]] = {}
    seen: dict[str, int] = {}
    for line_no, at, obj in _objects(text, file):
        at.only(obj, QUESTION_FIELDS, "a question line")
        qid = at.text(obj, "question_id")
        if qid in seen:
            raise at.fail("question_id", f"duplicate id {qid!r} (also line {seen[qid]})")
        seen[qid] = line_no
        cid = _conversation_id(at, obj)
        if cid not in by_id:
            raise at.fail("conversation_id", f"no conversation {cid!r} in the input")
        evidence = at.require(obj, "evidence", list, optional=True) or []
        refs = set(by_id[cid].passages[Passages.source_ref].to_list())
        for e in evidence:
            if str(e) not in refs:
                raise at.fail("evidence", f"no turn with id {e!r} in conversation {cid!r}")
        category = at.require(obj, "category", (str, int), optional=True)
        answer = at.require(obj, "answer", (str, int, float), optional=True)
        rows.setdefault(cid, []).append(
            dict(
                question_id=qid, question=at.text(obj, "question"),
                question_date=_timestamp(at, obj, "question_date", optional=True),
                answer=None if answer is None else str(answer),
                category=None if category is None else str(category),
                evidence=[str(e) for e in evidence], evidence_sessions=[],
            )
        )
    for cid, qs in rows.items():
        conv = by_id[cid]
        builder = ConversationBuilder(cid, conv.source_file, conv.source_format)
        for q in qs:
            builder.add_question(**q)
        conv.questions = builder.build().questions
