"""Passages -> frames and facts through a language model, with the embedded extractor as the fallback.

A passage whose model output stays invalid after the repair retry (or got no reply) is extracted
by the fallback instead, so no turn is lost from the memory; its frame says so in ``extractor``
and the failure is in the calls table.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date

from seem_dagster.episodic.extraction.interface import Event, Extractor, Fact, PassageExtraction, PassageInput
from seem_dagster.llm.client import LlmClient, LlmRun
from seem_dagster.llm.prompts import passage, query_facts
from seem_dagster.properties.stated import StatedProperty

_DATE = re.compile(r"^(\d{4})(?:-(\d{2})(?:-(\d{2}))?)?$")


def as_iso_time(value: str | None) -> str | None:
    """'2024-03-01' stays; '2024-03' -> '2024-03-01/2024-03-31'; '2024' -> the year's range; anything else None."""
    match = _DATE.match(value.strip()) if value else None
    if not match:
        return None
    year, month, day = match.groups()
    try:
        if day:
            return date(int(year), int(month), int(day)).isoformat()
        if month:
            last = calendar.monthrange(int(year), int(month))[1]
            return f"{year}-{month}-01/{year}-{month}-{last:02d}"
    except (ValueError, calendar.IllegalMonthError):
        return None
    return f"{year}-01-01/{year}-12-31"


def _text(value) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def event_from(e: dict) -> Event:
    return Event(
        participants=[p.strip() for p in e["participants"] if _text(p)], action=_text(e["action"]),
        time=as_iso_time(e["time"]), time_text=_text(e["time_text"]), location=_text(e["location"]),
        cause=_text(e["cause"]), manner=_text(e["manner"]),
    )


def extraction_from(output: dict, passage_id: str, fallback_summary: str) -> PassageExtraction:
    events = [event_from(e) for e in output["events"]]
    facts = [
        Fact(_text(f["subject"]), _text(f["relation"]), _text(f["object"]), as_iso_time(f["time"]), _text(f["time_text"]))
        for f in output["facts"]
        if _text(f["subject"]) and _text(f["relation"]) and _text(f["object"])
    ]
    properties = [
        StatedProperty(_text(p["entity"]), _text(p["property"]), _text(p["value"]), p["dtype"], as_iso_time(p["time"]))
        for p in output.get("properties", [])
        if _text(p["entity"]) and _text(p["property"]) and _text(p["value"])
    ]
    return PassageExtraction(passage_id, _text(output["summary"]) or fallback_summary, events, facts, properties)


def passage_payload(inp: PassageInput) -> dict:
    return passage.payload(inp.speaker, inp.text, inp.timestamp.date().isoformat(), inp.previous_speaker, inp.previous_text, list(inp.speakers))


@dataclass
class LlmExtraction:
    results: list[PassageExtraction]
    run: LlmRun
    fallback_ids: set[str]


def extract_passages(client: LlmClient, inputs: Sequence[PassageInput], fallback: Extractor, prompt=passage.PROMPT) -> LlmExtraction:
    """``prompt``: the passage prompt with the reply bounds of the settings (``passage.prompt``)."""
    run = client.run(prompt, [(inp.passage_id, passage_payload(inp)) for inp in inputs])
    failed = [inp for inp, out in zip(inputs, run.outputs) if out is None]
    rescued = {r.passage_id: r for r in fallback.extract(failed)} if failed else {}
    results = [
        extraction_from(out, inp.passage_id, f"{inp.speaker}: {inp.text}") if out is not None else rescued[inp.passage_id]
        for inp, out in zip(inputs, run.outputs)
    ]
    return LlmExtraction(results, run, set(rescued))


def query_fact_list(client: LlmClient, question: str, date_iso: str) -> tuple[list[Fact], LlmRun]:
    """The question's facts; the unknown it asks for stays out (an empty slot is not an entity)."""
    run = client.run(query_facts.PROMPT, [("query", query_facts.payload(question, date_iso))])
    output = run.outputs[0]
    facts = []
    for f in (output or {}).get("facts", []):
        subject, relation, obj = _text(f["subject"]), _text(f["relation"]), _text(f["object"])
        if relation and (subject or obj):
            facts.append(Fact(subject or "", relation, obj or "", as_iso_time(f["time"])))
    return facts, run
