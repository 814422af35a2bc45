"""A question -> the facts it asks about, as (subject, relation, object, time) with unknowns left empty."""

from __future__ import annotations

from seem_dagster.llm.prompts import ISO_DATE, TEXT, Prompt, nullable

FACT = {
    "type": "object",
    "properties": {"subject": TEXT, "relation": TEXT, "object": TEXT, "time": nullable(ISO_DATE)},
    "required": ["subject", "relation", "object", "time"],
    "additionalProperties": False,
}
SCHEMA = {"type": "object", "properties": {"facts": {"type": "array", "items": FACT}}, "required": ["facts"], "additionalProperties": False}

PROMPT = Prompt(
    name="query_facts",
    version="1",
    system="You rewrite questions about a conversation as the facts that would answer them.",
    task=(
        "For `question` (asked on `question_date`), list the facts whose truth would answer it, as (subject, relation, object). "
        "Put the unknown the question asks for as an empty string. Resolve relative times against question_date as an ISO date "
        "(YYYY, YYYY-MM or YYYY-MM-DD), else null. A question with two parts gives at least one fact per part."
    ),
    schema=SCHEMA,
    max_tokens=256,
)


def payload(question: str, question_date: str) -> dict:
    return {"question": question, "question_date": question_date}
