"""A question -> the vectors retrieval needs: the question's own and those of its extracted quadruples."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import numpy as np

from seem_dagster.extraction.interface import Extractor, Fact, PassageInput
from seem_dagster.retrieval.index import fact_text

QUERY_SPEAKER = "user"


@dataclass
class EncodedQuery:
    question: str
    date: datetime
    vector: np.ndarray
    facts: list[Fact]
    fact_vectors: np.ndarray


def encode_query(
    question: str, date: datetime, extractor: Extractor, embedder, conversation_id: str = "query", facts: list[Fact] | None = None
) -> EncodedQuery:
    """Relative dates in the question resolve against ``date`` (e.g. LongMemEval's question_date).
    ``facts`` from a language model replace the extractor's."""
    if facts is None:
        (extraction,) = extractor.extract(
            [PassageInput(passage_id="query", conversation_id=conversation_id, speaker=QUERY_SPEAKER, text=question, timestamp=date)]
        )
        facts = extraction.facts
    texts = [question] + [fact_text(f.subject, f.relation, f.object).strip() for f in facts]
    vectors = embedder.encode(texts)
    return EncodedQuery(question, date, vectors[0], facts, vectors[1:])
