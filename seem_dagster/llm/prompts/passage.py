"""One call per passage: its event frame (summary + events with the six roles) and its time-stamped facts."""

from __future__ import annotations

from seem_dagster.llm.prompts import ISO_DATE, TEXT, Prompt, nullable

EVENT = {
    "type": "object",
    "properties": {
        "participants": {"type": "array", "items": TEXT},
        "action": TEXT,
        "time": nullable(ISO_DATE),
        "time_text": nullable(TEXT),
        "location": nullable(TEXT),
        "cause": nullable(TEXT),
        "manner": nullable(TEXT),
    },
    "required": ["participants", "action", "time", "time_text", "location", "cause", "manner"],
    "additionalProperties": False,
}
FACT = {
    "type": "object",
    "properties": {"subject": TEXT, "relation": TEXT, "object": TEXT, "time": nullable(ISO_DATE), "time_text": nullable(TEXT)},
    "required": ["subject", "relation", "object", "time", "time_text"],
    "additionalProperties": False,
}
SCHEMA = {
    "type": "object",
    "properties": {"summary": TEXT, "events": {"type": "array", "items": EVENT}, "facts": {"type": "array", "items": FACT}},
    "required": ["summary", "events", "facts"],
    "additionalProperties": False,
}

PROMPT = Prompt(
    name="passage",
    version="1",
    system="You turn one turn of a conversation into structured memory: an event frame and facts. You are precise and never invent.",
    task=(
        "Read `turn` (said by `speaker` on `session_date`; `previous_turn` is context only). Write:\n"
        "- summary: one sentence in the third person naming the speaker instead of I/me (and the other speaker instead of you).\n"
        "- events: what happened or is planned in this turn, each with participants (names), action (verb phrase), "
        "time as an absolute ISO date (YYYY, YYYY-MM or YYYY-MM-DD) resolved against session_date "
        "('yesterday', 'last Saturday', 'next month'), time_text (the words that gave the time), location, cause, manner; null when not said.\n"
        "- facts: (subject, relation, object) triples stated in this turn, names instead of pronouns, with time as for events.\n"
        "Greetings and small talk give empty events and facts."
    ),
    schema=SCHEMA,
    max_tokens=768,
)


def payload(speaker: str, text: str, session_date: str, previous_speaker: str | None, previous_text: str | None, speakers: list[str]) -> dict:
    previous = {"speaker": previous_speaker, "text": previous_text} if previous_text else None
    return {"speaker": speaker, "session_date": session_date, "speakers": speakers, "previous_turn": previous, "turn": text}
