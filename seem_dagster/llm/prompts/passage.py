"""One call per passage: its event frame (summary + events with the six roles), its time-stamped facts
and its properties (entity -> property -> typed value, APEX-MEM's property memory).

Version 2 added ``properties``; the property names the memory knows as single-valued are listed in
the task so the model uses them (``properties.vocabulary``); any other name is taken as multi-valued.
"""

from __future__ import annotations

from seem_dagster.llm.prompts import ISO_DATE, TEXT, Prompt, nullable
from seem_dagster.properties.vocabulary import SINGLE_ROLES, SINGLE_VALUED

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
PROPERTY = {
    "type": "object",
    "properties": {
        "entity": TEXT, "property": TEXT, "value": TEXT,
        "dtype": {"type": "string", "enum": ["string", "date", "number", "boolean"]},
        "time": nullable(ISO_DATE),
    },
    "required": ["entity", "property", "value", "dtype", "time"],
    "additionalProperties": False,
}
SCHEMA = {
    "type": "object",
    "properties": {"summary": TEXT, "events": {"type": "array", "items": EVENT}, "facts": {"type": "array", "items": FACT},
                   "properties": {"type": "array", "items": PROPERTY}},
    "required": ["summary", "events", "facts", "properties"],
    "additionalProperties": False,
}
KNOWN_NAMES = ", ".join([*SINGLE_VALUED, *sorted(SINGLE_ROLES - {"fiancé", "fiancée"}), "<thing>_count"])

PROMPT = Prompt(
    name="passage",
    version="2",
    system="You turn one turn of a conversation into structured memory: an event frame, facts and properties. You are precise and never invent.",
    task=(
        "Read `turn` (said by `speaker` on `session_date`; `previous_turn` is context only). Write:\n"
        "- summary: one sentence in the third person naming the speaker instead of I/me (and the other speaker instead of you).\n"
        "- events: what happened or is planned in this turn, each with participants (names), action (verb phrase), "
        "time as an absolute ISO date (YYYY, YYYY-MM or YYYY-MM-DD) resolved against session_date "
        "('yesterday', 'last Saturday', 'next month'), time_text (the words that gave the time), location, cause, manner; null when not said.\n"
        "- facts: (subject, relation, object) triples stated in this turn, names instead of pronouns, with time as for events.\n"
        "- properties: what this turn says an entity (a person, pet, place, thing) is or has, as (entity, property, value): "
        "property a short snake_case name (these hold one value at a time: " + KNOWN_NAMES + "; use them when they fit, "
        "else a plain name like activities or visited_places), value as said, dtype string, date (ISO), number (digits) "
        "or boolean (true/false), time when the value starts to hold, resolved like event times, else null.\n"
        "Greetings and small talk give empty events, facts and properties."
    ),
    schema=SCHEMA,
    max_tokens=768,
)


def payload(speaker: str, text: str, session_date: str, previous_speaker: str | None, previous_text: str | None, speakers: list[str]) -> dict:
    previous = {"speaker": previous_speaker, "text": previous_text} if previous_text else None
    return {"speaker": speaker, "session_date": session_date, "speakers": speakers, "previous_turn": previous, "turn": text}
