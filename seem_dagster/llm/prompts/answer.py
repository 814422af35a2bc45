"""Answer generation from the synthesized context (dated turns, episode summaries, seed facts)."""

from __future__ import annotations

from seem_dagster.llm.prompts import TEXT, Prompt

SCHEMA = {
    "type": "object",
    "properties": {"answer": TEXT, "evidence": {"type": "array", "items": TEXT}},
    "required": ["answer", "evidence"],
    "additionalProperties": False,
}

PROMPT = Prompt(
    name="answer",
    version="1",
    system="You answer questions about a long conversation using only the memory you are given.",
    task=(
        "Answer `question`, asked on `question_date`, from `context` only: short, with absolute dates where the context dates "
        "them (resolve 'last week' against the turn's date). evidence: the references of the turns you used, the first "
        "part of their brackets, like D3:4. When the context does not say, answer \"not in memory\" with no evidence."
    ),
    schema=SCHEMA,
    max_tokens=256,
)


def payload(question: str, question_date: str, context: str) -> dict:
    return {"question": question, "question_date": question_date, "context": context}
