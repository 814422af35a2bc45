"""A question -> the vectors retrieval needs: the question's own, the question's without the
conversation's speakers' names, and those of its extracted quadruples."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

from seem_dagster.episodic.extraction.interface import Extractor, Fact, PassageInput
from seem_dagster.retrieval.index import fact_text
from seem_dagster.retrieval.question_events import events_of
from seem_dagster.retrieval.question_form import asks_advice, asks_latest
from seem_dagster.retrieval.question_time import Window, question_window

QUERY_SPEAKER = "user"


@dataclass
class EncodedQuery:
    question: str
    date: datetime
    vector: np.ndarray
    facts: list[Fact]
    fact_vectors: np.ndarray
    # The question without the speakers' names (None when it names none): see without_speakers.
    unnamed_vector: np.ndarray | None = None
    # The question asks for several things (question_form.asks_for_several): RPE expands only its best
    # match (RetrievalConfig.list_top_passages_rpe).
    several: bool = False
    # The days the question is about (question_time), when it names a time; never for a request for advice.
    window: Window | None = None
    # One question per event when it asks about two or more (question_events), each encoded alone.
    parts: list[EncodedQuery] = field(default_factory=list)
    latest: bool = False  # it asks what holds now or happened last (question_form.asks_latest)
    advice: bool = False  # it asks for a recommendation or tips (question_form.asks_advice)


def without_speakers(question: str, speakers: Iterable[str]) -> str | None:
    """The question with the conversation's speakers' names (and their possessive) taken out, or None
    when it names none of them or nothing is left. Every passage is embedded as ``speaker: text``, so
    a speaker's name in the question matches all of that speaker's turns alike and drowns the topic
    ("What activities does Melanie partake in?" ranks her turns about anything above the pottery
    turn); matched without the name, the question's topic decides. Names match as written and
    as whole words: for a speaker called Will, "will" stays."""
    pattern = _names_pattern(speakers)
    if pattern is None:
        return None
    stripped, count = pattern.subn(" ", question)
    stripped = re.sub(r"\s+", " ", stripped).strip()
    return stripped if count and re.search(r"\w", stripped) else None


def named_speakers(question: str, speakers: Iterable[str]) -> set[str]:
    """The speakers the question names, matched as without_speakers matches them."""
    pattern = _names_pattern(speakers)
    if pattern is None:
        return set()
    by_name = {s.strip(): s for s in speakers if s and s.strip()}
    return {by_name[m.group(1)] for m in pattern.finditer(question)}


def _names_pattern(speakers: Iterable[str]) -> re.Pattern | None:
    """Whole-word matches of any of the names (longest first), with an optional possessive; None for none."""
    names = sorted({s.strip() for s in speakers if s and s.strip()}, key=len, reverse=True)
    if not names:
        return None
    return re.compile(r"(?<![\w'’])(" + "|".join(re.escape(n) for n in names) + r")(?:['’]s)?(?![\w])")


def encode_query(
    question: str, date: datetime, extractor: Extractor, embedder, conversation_id: str = "query", facts: list[Fact] | None = None,
    speakers: Iterable[str] = (), several: bool = False, compose_names: float = 0.0,
) -> EncodedQuery:
    """Relative dates in the question resolve against ``date`` (e.g. LongMemEval's question_date).
    ``facts`` from a language model replace the extractor's. ``speakers``: the conversation's, whose
    names the unnamed vector leaves out (none given: no unnamed vector). ``several``: whether the
    question asks for several things (form_of). ``compose_names`` (retrieval.compose_names): above 0,
    a question that names a speaker is encoded without the names only, and its own vector composed
    from that one and the names' (composed_vector); 0: it is encoded a second time as asked."""
    if facts is None:
        (extraction,) = extractor.extract(
            [PassageInput(passage_id="query", conversation_id=conversation_id, speaker=QUERY_SPEAKER, text=question, timestamp=date)]
        )
        facts = extraction.facts
    speakers = list(speakers)
    fact_texts = [fact_text(f.subject, f.relation, f.object).strip() for f in facts]
    asked = [question, *events_of(question)]  # the question, then one question per event it names
    forms = [(text, without_speakers(text, speakers)) for text in asked]
    texts: list[str] = []
    for i, (text, unnamed) in enumerate(forms):  # one forward pass for the question, its facts and its events
        texts += ([] if unnamed and compose_names else [text]) + ([unnamed] if unnamed else []) + (fact_texts if i == 0 else [])
    vectors = iter(embedder.encode(texts))
    encoded = []
    for i, (text, unnamed) in enumerate(forms):
        own = None if unnamed and compose_names else next(vectors)
        unnamed_vector = next(vectors) if unnamed else None
        if own is None:
            own = composed_vector(unnamed_vector, [_name_vector(embedder, n) for n in named_speakers(text, speakers)], compose_names)
        encoded.append((own, unnamed_vector, np.stack([next(vectors) for _ in fact_texts]) if i == 0 and fact_texts
                        else np.zeros((0, len(own)), dtype=np.float32)))
    window, latest, advice = read_question(question, date)
    own, unnamed_vector, fact_vectors = encoded[0]
    query = EncodedQuery(question, date, own, facts, fact_vectors, unnamed_vector, several, window, latest=latest, advice=advice)
    for (event, _), (own, unnamed_vector, none) in zip(forms[1:], encoded[1:]):
        query.parts.append(EncodedQuery(event, date, own, [], none, unnamed_vector, False, window,
                                        latest=not advice and asks_latest(event)))
    return query


def read_question(question: str, date: datetime) -> tuple[Window | None, bool, bool]:
    """(window, latest, advice): the days the question is about, whether it asks what holds now or
    happened last, whether it asks for advice. A request for advice reads no time at all: in "suggest
    accessories for my current camera setup" or "should I buy a NAS now or wait?" the time words set
    the scene of the request, and the sessions that match it are neither of those days nor statements
    of one thing to put latest first."""
    if asks_advice(question):
        return None, False, True
    return question_window(question, date), asks_latest(question), False


def composed_vector(unnamed: np.ndarray, names: list[np.ndarray], weight: float) -> np.ndarray:
    """A question's vector as if encoded with the speakers' names: its vector without them plus
    ``weight`` times each name's, normalised. Encoding the question a second time costs a forward pass
    (most of a query's time); within noise of the encoded one on LoCoMo's dev questions."""
    vector = unnamed + weight * np.sum(names, axis=0) if names else unnamed
    return (vector / max(float(np.linalg.norm(vector)), 1e-12)).astype(np.float32)


@functools.lru_cache(maxsize=4096)
def _name_vector(embedder, name: str) -> np.ndarray:
    """A speaker's name encoded alone, once per encoder and name (a conversation has two or a few)."""
    return embedder.encode([name])[0]


def form_of(question: str, config) -> bool:
    """Whether the question asks for several things, when the retrieval ``config`` (RetrievalConfig)
    uses it (its reads_form); False without a look at the question otherwise."""
    from seem_dagster.retrieval.question_form import WORD, asks_for_several, may_ask_for_several

    if not config.reads_form or not may_ask_for_several(question):
        return False
    if WORD.findall(question)[0].lower() == "how":  # "how many": a list, whatever the tags say of the rest
        return True
    from seem_dagster.retrieval.question_tags import question_tags

    return asks_for_several(question_tags(question))
