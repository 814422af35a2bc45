"""LongMemEval JSON: one memory per question, each with its own haystack of sessions.

Session ids (``answer_...`` leaks the gold) never become text or a session_id: they live only in
``source_ref`` (``<session id>:<turn index>``; see SESSION_REPEAT) and the questions' evidence, which evaluation alone reads.
"""

from __future__ import annotations

from seem_dagster.config import IngestConfig
from seem_dagster.ingest import dates
from seem_dagster.ingest.conversation import Conversation, ConversationBuilder
from seem_dagster.ingest.errors import InputError, Located
from seem_dagster.store.keys import InvalidConversationId, check_conversation_id

FORMAT = "longmemeval"
ROLES = {"user", "assistant"}
SESSION_REPEAT = "#"  # "<session id>#<n>:<turn>" marks the n-th verbatim repeat of a session


def session_of(source_ref: str) -> str:
    """The benchmark's session id behind a source_ref (what session-level evaluation compares)."""
    return source_ref.rsplit(":", 1)[0].split(SESSION_REPEAT, 1)[0]


def read(data: object, file: str, options: IngestConfig) -> list[Conversation]:
    if not isinstance(data, list):
        raise InputError(file, None, None, "expected a JSON array of LongMemEval questions")
    seen: dict[str, int] = {}
    conversations = []
    for index, item in enumerate(data):
        at = Located(file, f"question {index}")
        qid = at.require(item, "question_id", str)
        try:
            check_conversation_id(qid)
        except InvalidConversationId as err:
            raise at.fail("question_id", str(err)) from None
        if qid in seen:
            raise at.fail("question_id", f"duplicate id {qid!r} (also question {seen[qid]})")
        seen[qid] = index
        conversations.append(_read_item(item, qid, Located(file, f"question {index} ({qid})"), options))
    return conversations


def _parse_date(at: Located, field: str, value: str):
    try:
        return dates.parse_longmemeval(value)
    except dates.DateOutOfRange as err:
        raise at.fail(field, str(err)) from None
    except ValueError:
        raise at.fail(field, f"unparseable date {value!r} (expected like '2023/07/01 (Sat) 02:36')") from None


def _read_item(item: dict, qid: str, at: Located, options: IngestConfig) -> Conversation:
    session_ids = at.require(item, "haystack_session_ids", list)
    session_dates = at.require(item, "haystack_dates", list)
    sessions = at.require(item, "haystack_sessions", list)
    if not (len(session_ids) == len(session_dates) == len(sessions)):
        raise at.fail(
            "haystack_sessions",
            f"{len(sessions)} sessions but {len(session_ids)} session ids and {len(session_dates)} dates",
        )
    builder = ConversationBuilder(qid, at.file, FORMAT)
    gold_turns: list[str] = []
    seen_sessions: dict[str, tuple[int, list]] = {}
    for s_index, (sid, sdate, turns) in enumerate(zip(session_ids, session_dates, sessions)):
        where_s = Located(at.file, f"{at.record}, session {s_index}")
        if not isinstance(sid, str) or not sid.strip():
            raise where_s.fail("haystack_session_ids", f"expected a non-empty string, got {sid!r}")
        where_s.checked("haystack_session_ids", sid)
        # The public files repeat a few sessions verbatim under the same id on another date. Keep
        # both (they are real history) with the repeat's refs marked "<id>#2:<turn>"; a repeated
        # id with different content is ambiguous and rejected.
        occurrence = seen_sessions.get(sid, (0, None))[0] + 1
        if occurrence > 1 and seen_sessions[sid][1] != turns:
            raise where_s.fail("haystack_session_ids", f"duplicate session id {sid!r} with different turns")
        seen_sessions[sid] = (occurrence, turns)
        ref_prefix = sid if occurrence == 1 else f"{sid}{SESSION_REPEAT}{occurrence}"
        if not isinstance(sdate, str):
            raise where_s.fail("haystack_dates", f"expected a string, got {sdate!r}")
        where_s.checked("haystack_dates", sdate)
        timestamp = _parse_date(where_s, "haystack_dates", sdate)
        if not isinstance(turns, list):
            raise where_s.fail("haystack_sessions", "expected an array of turns")
        for t_index, turn in enumerate(turns):
            where = Located(at.file, f"{at.record}, session {s_index}, turn {t_index}")
            role = where.require(turn, "role", str)
            if role not in ROLES:
                raise where.fail("role", f"expected 'user' or 'assistant', got {role!r}")
            source_ref = f"{ref_prefix}:{t_index}"
            try:
                text = where.text(turn, "content", max_chars=options.max_turn_chars)
            except InputError as err:
                if err.problem != "empty text" or not options.allow_empty_turns:
                    raise
                builder.skipped.append(f"{where.record} ({source_ref}): empty text")
                continue
            if role == "user" and turn.get("has_answer") is True:
                gold_turns.append(source_ref)
            builder.add_turn(
                session_id=f"session_{s_index}", session_index=s_index, turn_index=t_index,
                speaker=role, text=text, timestamp=timestamp, source_ref=source_ref,
            )
    builder.require_turns(at, "haystack_sessions")
    question = at.text(item, "question")
    qdate = at.require(item, "question_date", str, optional=True)
    answer = at.checked("answer", item.get("answer"))
    answer_sessions = at.require(item, "answer_session_ids", list, optional=True) or []
    builder.add_question(
        question_id=qid,
        question=question,
        question_date=_parse_date(at, "question_date", qdate) if qdate else None,
        answer=None if answer is None else str(answer),
        category=at.require(item, "question_type", str, optional=True),
        evidence=gold_turns,
        evidence_sessions=[str(s) for s in answer_sessions],
    )
    return builder.build()
