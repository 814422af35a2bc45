"""LoCoMo JSON: a list of samples, each with ``conversation`` (``session_N`` turn lists and their dates) and ``qa``."""

from __future__ import annotations

import re

from seem_dagster.config import IngestConfig
from seem_dagster.ingest import dates
from seem_dagster.ingest.conversation import Conversation, ConversationBuilder
from seem_dagster.ingest.errors import InputError, Located, json_type
from seem_dagster.store.keys import InvalidConversationId, check_conversation_id

FORMAT = "locomo"
_SESSION_KEY = re.compile(r"^session_(\d+)$")


def read(data: object, file: str, options: IngestConfig) -> list[Conversation]:
    if not isinstance(data, list):
        raise InputError(file, None, None, "expected a JSON array of LoCoMo samples")
    conversations = []
    seen: dict[str, int] = {}
    for index, sample in enumerate(data):
        at = Located(file, f"sample {index}")
        sample_id = at.require(sample, "sample_id", str)
        try:
            check_conversation_id(sample_id)
        except InvalidConversationId as err:
            raise at.fail("sample_id", str(err)) from None
        if sample_id in seen:
            raise at.fail("sample_id", f"duplicate id {sample_id!r} (also sample {seen[sample_id]})")
        seen[sample_id] = index
        conversations.append(_read_sample(sample, sample_id, Located(file, f"sample {index} ({sample_id})"), options))
    return conversations


def _read_sample(sample: dict, sample_id: str, at: Located, options: IngestConfig) -> Conversation:
    conv = at.require(sample, "conversation", dict)
    builder = ConversationBuilder(sample_id, at.file, FORMAT)
    # Some samples carry date keys for sessions that do not exist: iterate over the turn lists.
    sessions = sorted(
        ((int(m.group(1)), key) for key in conv if (m := _SESSION_KEY.match(key))),
        key=lambda pair: pair[0],
    )
    seen_refs: dict[str, str] = {}
    for session_index, (_number, key) in enumerate(sessions):
        turns = Located(at.file, f"{at.record}, conversation").require(conv, key, list)
        date_key = f"{key}_date_time"
        date_text = Located(at.file, f"{at.record}, conversation").require(conv, date_key, str)
        try:
            timestamp = dates.parse_locomo(date_text)
        except dates.DateOutOfRange as err:
            raise InputError(at.file, f"{at.record}, conversation", date_key, str(err)) from None
        except ValueError:
            raise InputError(
                at.file, f"{at.record}, conversation", date_key,
                f"unparseable date {date_text!r} (expected like '1:56 pm on 8 May, 2023')",
            ) from None
        for turn_index, turn in enumerate(turns):
            where = Located(at.file, f"{at.record}, {key}, turn {turn_index}")
            dia_id = where.identifier(turn, "dia_id")
            where = Located(at.file, f"{at.record}, {key}, turn {turn_index} ({dia_id})")
            speaker = where.text(turn, "speaker")
            caption = where.require(turn, "blip_caption", str, optional=True)
            try:
                text = where.text(turn, "text", max_chars=options.max_turn_chars)
            except InputError as err:
                if err.problem != "empty text" or not (caption or options.allow_empty_turns):
                    raise
                text = ""
            if caption:
                text = f'{speaker} said, "{text}" and shared {caption}'
            if not text:
                builder.skipped.append(f"{where.record}: empty text")
                continue
            if dia_id in seen_refs:
                raise where.fail("dia_id", f"duplicate id {dia_id!r} (also {seen_refs[dia_id]})")
            seen_refs[dia_id] = where.record
            builder.add_turn(
                session_id=key, session_index=session_index, turn_index=turn_index, speaker=speaker,
                text=text, timestamp=timestamp, source_ref=dia_id,
            )
    builder.require_turns(at, "conversation")
    for q_index, qa in enumerate(at.require(sample, "qa", list, optional=True) or []):
        where = Located(at.file, f"{at.record}, qa {q_index}")
        question = where.text(qa, "question")
        answer = qa.get("answer", qa.get("adversarial_answer")) if isinstance(qa, dict) else None
        where.checked("answer", answer)
        category = where.require(qa, "category", (int, str), optional=True)
        evidence = where.require(qa, "evidence", list, optional=True) or []
        for e_index, ref in enumerate(evidence):
            # The public files hold a few broken ids ("D8:6; D9:17", "D:11:26", "D"), which evaluation
            # repairs or drops; anything that is not a dialogue id string at all names no turn.
            if not isinstance(ref, str) or not ref.strip().startswith("D"):
                raise where.fail("evidence", f"item {e_index} is {json_type(ref)} {ref!r}, not a dialogue id like 'D1:3'")
        builder.add_question(
            question_id=f"{sample_id}:q{q_index}",
            question=question,
            question_date=None,
            answer=None if answer is None else str(answer),
            category=None if category is None else str(category),
            # Kept as written; evaluation normalises the known broken forms.
            evidence=[str(e) for e in evidence],
            evidence_sessions=[],
        )
    return builder.build()
