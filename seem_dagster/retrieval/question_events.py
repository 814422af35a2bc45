"""Questions about two or more events, split into one question per event (pure).

"Which device did I set up first, the smart thermostat or the mesh network system?", "How many days
passed between the day I replaced my spark plugs and the day I washed the car?", "What is the order
of the three events: 'A', 'B', 'C'?": the answer needs every event's turn, and one ranking of the
whole question tends to fill its top with turns about one of them. Each event becomes a question of
its own (the question's head with that event alone), ranked apart, and the rankings are merged so
that each event's best turns reach the top (``retrieval.answer.rank``).

Also the questions of how two states compare ("... previously? ... now?") are two questions.
"""

from __future__ import annotations

import re

MIN_EVENT_CHARS = 3
MAX_EVENTS = 4
# A quoted event: 'Rack Fest', "Turbocharged Tuesdays", ‘…’; an apostrophe inside a word is no quote.
QUOTED = re.compile(r"""(?<![\w])['"‘“]([^'"‘’“”]{3,120}?)['"’”](?![\w])""")
# "..., A or B?" after a comma or colon, "first: A or B", "A or B first?".
CHOICE = re.compile(r"^(?P<head>.+?)[,:]\s*(?P<a>[^,:?]+?)\s+or\s+(?P<b>[^,:?]+?)\s*\??\s*$", re.IGNORECASE)
BETWEEN = re.compile(r"^(?P<head>.*?\bbetween)\s+(?P<a>.+?)\s+and\s+(?P<b>.+?)\s*\??\s*$", re.IGNORECASE)
ORDER = re.compile(r"\b(order|sequence)\b.*?:\s*(?P<list>.+?)\s*\??\s*$", re.IGNORECASE)
# "between August 11 and August 15" is a stretch of time (question_time reads it), not two events.
DATE = re.compile(r"\b(\d{1,4}|january|february|march|april|may|june|july|august|september|october|november|december)\b",
                  re.IGNORECASE)
TWO_QUESTIONS = re.compile(r"^(?P<a>[^?]+\?)\s*(?P<b>[^?]+\?)\s*$")


def _clean(text: str) -> str:
    return " ".join(text.strip(" ,.;:?!'\"‘’“”").split())


def _with_head(head: str, events: list[str]) -> list[str]:
    head = re.sub(r"\b(first|earlier|later|last|before|after)\s*$", "", head.strip(), flags=re.IGNORECASE).strip(" ,:")
    return [f"{head} {event}".strip() for event in events]


def events_of(question: str) -> list[str]:
    """The question's events as questions of their own; [] when it is about one thing."""
    q = " ".join(question.split())
    if m := TWO_QUESTIONS.match(q):
        return [_clean(m.group("a")), _clean(m.group("b"))]
    quoted = [_clean(x) for x in QUOTED.findall(q)]
    quoted = [x for x in quoted if len(x) >= MIN_EVENT_CHARS]
    if m := ORDER.search(q):
        items = quoted or [_clean(x) for x in re.split(r",\s*(?:and\s+)?|\s+and\s+", m.group("list"))]
        items = [x for x in items if len(x) >= MIN_EVENT_CHARS]
        if len(items) >= 2:
            return items[:MAX_EVENTS]
    if len(quoted) >= 2:
        # Each quoted event with the rest of the question, the other quoted events left out.
        out = []
        for keep in quoted[:MAX_EVENTS]:
            text = QUOTED.sub(lambda m, keep=keep: m.group(1) if _clean(m.group(1)) == keep else "", q)
            out.append(_clean(re.sub(r"\s+", " ", text)))
        return out
    if m := BETWEEN.match(q):
        a, b = _clean(m.group("a")), _clean(m.group("b"))
        if len(a) >= MIN_EVENT_CHARS and len(b) >= MIN_EVENT_CHARS and not (DATE.search(a) and DATE.search(b)):
            return _with_head(m.group("head")[: -len("between")], [a, b])
    if m := CHOICE.match(q):
        a, b = _clean(m.group("a")), _clean(m.group("b"))
        if len(a) >= MIN_EVENT_CHARS and len(b) >= MIN_EVENT_CHARS:
            return _with_head(m.group("head"), [a, b])
    return []
