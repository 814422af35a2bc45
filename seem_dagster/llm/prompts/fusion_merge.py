"""Fusion merge: the frames of one episode -> its summary and merged events."""

from __future__ import annotations

from seem_dagster.llm.prompts import TEXT, Prompt
from seem_dagster.llm.prompts.passage import EVENT

SCHEMA = {
    "type": "object",
    "properties": {"summary": TEXT, "events": {"type": "array", "items": EVENT}},
    "required": ["summary", "events"],
    "additionalProperties": False,
}

PROMPT = Prompt(
    name="fusion_merge",
    version="1",
    system="You merge the frames of one event, told across a conversation, into one account.",
    task=(
        "`frames` are dated frames of the same event, oldest first. Write summary: two sentences at most covering the whole "
        "event with its dates; and events: the distinct happenings, duplicates merged, each with the six roles as given "
        "(time as an ISO date)."
    ),
    schema=SCHEMA,
    max_tokens=512,
)


def payload(frames: list[tuple[str, str, list[dict]]]) -> dict:
    return {"frames": [{"date": d, "summary": s, "events": e} for d, s, e in frames]}
