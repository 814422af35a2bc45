"""LLM judge for evaluation: is a generated answer correct against the gold answer?"""

from __future__ import annotations

from seem_dagster.llm.prompts import TEXT, Prompt

SCHEMA = {
    "type": "object",
    "properties": {"correct": {"type": "boolean"}, "reason": TEXT},
    "required": ["correct", "reason"],
    "additionalProperties": False,
}

PROMPT = Prompt(
    name="judge",
    version="1",
    system="You grade answers to questions about a conversation against the reference answer.",
    task=(
        "correct is true when `answer` says the same as `gold` for `question`: other wording, a different but equivalent date "
        "format, or extra detail that does not contradict is fine; a missing key part or a contradiction is not. One-sentence reason."
    ),
    schema=SCHEMA,
    max_tokens=128,
)


def payload(question: str, gold: str, answer: str) -> dict:
    return {"question": question, "gold": gold, "answer": answer}
