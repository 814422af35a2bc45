"""Fusion judge: does a new event frame belong to an existing episode (the same real-world event)?"""

from __future__ import annotations

from seem_dagster.llm.prompts import TEXT, Prompt

SCHEMA = {
    "type": "object",
    "properties": {"same_event": {"type": "boolean"}, "reason": TEXT},
    "required": ["same_event", "reason"],
    "additionalProperties": False,
}

PROMPT = Prompt(
    name="fusion_judge",
    version="1",
    system="You decide whether two descriptions from a long conversation are about the same real-world event or storyline.",
    task=(
        "`episode` is an event already in memory (its summary and its dated frames); `frame` is a new turn's frame. "
        "same_event is true when the frame continues, updates, or refers back to that event (the same trip, injury, adoption, "
        "project), false when it is merely a similar kind of thing. Give a one-sentence reason."
    ),
    schema=SCHEMA,
    max_tokens=128,
)


def payload(episode_summary: str, episode_frames: list[tuple[str, str]], frame_summary: str, frame_date: str) -> dict:
    return {
        "episode": {"summary": episode_summary, "frames": [{"date": d, "summary": s} for d, s in episode_frames]},
        "frame": {"date": frame_date, "summary": frame_summary},
    }
