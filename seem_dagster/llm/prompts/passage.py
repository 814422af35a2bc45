"""One call per passage: its event frame (summary + events with the six roles), its time-stamped facts
and its properties (entity -> property -> typed value, APEX-MEM's property memory).

Version 2 bounded the reply's lists and texts; version 3 adds ``properties``. The property names the
memory knows as single-valued are listed in the task so the model uses them
(``properties.vocabulary``); any other name is taken as multi-valued.
"""

from __future__ import annotations

import dataclasses

from seem_dagster.llm.prompts import ISO_DATE, TEXT, Prompt, nullable
from seem_dagster.properties.vocabulary import SINGLE_ROLES, SINGLE_VALUED

# What a reply may hold at most, so a server that decodes by the schema's grammar (llama.cpp's
# json_object with a schema, vLLM's structured output) closes the JSON within the token cap instead
# of looping to it. The settings llm.max_events, llm.max_facts and llm.max_field_chars choose them;
# properties are bounded like facts.
DEFAULT_BOUNDS = (6, 10, 200)
MAX_PARTICIPANTS = 8


def event_schema(text: dict, max_participants: int | None = None) -> dict:
    participants = {"type": "array", "items": text} | ({"maxItems": max_participants} if max_participants is not None else {})
    return {
        "type": "object",
        "properties": {
            "participants": participants,
            "action": text,
            "time": nullable(ISO_DATE),
            "time_text": nullable(text),
            "location": nullable(text),
            "cause": nullable(text),
            "manner": nullable(text),
        },
        "required": ["participants", "action", "time", "time_text", "location", "cause", "manner"],
        "additionalProperties": False,
    }


EVENT = event_schema(TEXT)  # unbounded: what the fusion merge prompt writes


def schema(max_events: int, max_facts: int, max_chars: int) -> dict:
    text = {**TEXT, "maxLength": max_chars}
    fact = {
        "type": "object",
        "properties": {"subject": text, "relation": text, "object": text, "time": nullable(ISO_DATE), "time_text": nullable(text)},
        "required": ["subject", "relation", "object", "time", "time_text"],
        "additionalProperties": False,
    }
    prop = {
        "type": "object",
        "properties": {
            "entity": text, "property": text, "value": text,
            "dtype": {"type": "string", "enum": ["string", "date", "number", "boolean"]},
            "time": nullable(ISO_DATE),
        },
        "required": ["entity", "property", "value", "dtype", "time"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {"summary": text, "events": {"type": "array", "items": event_schema(text, MAX_PARTICIPANTS), "maxItems": max_events},
                       "facts": {"type": "array", "items": fact, "maxItems": max_facts},
                       "properties": {"type": "array", "items": prop, "maxItems": max_facts}},
        "required": ["summary", "events", "facts", "properties"],
        "additionalProperties": False,
    }


SCHEMA = schema(*DEFAULT_BOUNDS)
KNOWN_NAMES = ", ".join([*SINGLE_VALUED, *sorted(SINGLE_ROLES - {"fiancé", "fiancée"}), "<thing>_count"])

PROMPT = Prompt(
    name="passage",
    version="3",  # 2: the reply's lists and texts are bounded; 3: properties
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


def prompt(max_events: int, max_facts: int, max_chars: int) -> Prompt:
    """The passage prompt with these bounds on its reply."""
    if (max_events, max_facts, max_chars) == DEFAULT_BOUNDS:
        return PROMPT
    return dataclasses.replace(PROMPT, schema=schema(max_events, max_facts, max_chars))


def payload(speaker: str, text: str, session_date: str, previous_speaker: str | None, previous_text: str | None, speakers: list[str]) -> dict:
    previous = {"speaker": previous_speaker, "text": previous_text} if previous_text else None
    return {"speaker": speaker, "session_date": session_date, "speakers": speakers, "previous_turn": previous, "turn": text}
