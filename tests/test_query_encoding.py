"""A question's vectors on the real MiniLM: encoded once when it names a speaker, its own vector then
composed from the vector without the names and the names' (retrieval.compose_names)."""

from datetime import datetime

import numpy as np

from seem_dagster import backends
from seem_dagster.retrieval.query import _name_vector, encode_query

SPEAKERS = ["Caroline", "Melanie"]
ASKED = datetime(2023, 5, 8)


class Counting:
    """The real question encoder, with the texts it was asked to encode written down."""

    def __init__(self, embedder):
        self.embedder, self.texts = embedder, []

    def encode(self, texts):
        self.texts += list(texts)
        return self.embedder.encode(texts)


def _encode(question, embedder, compose):
    return encode_query(question, ASKED, None, embedder, facts=[], speakers=SPEAKERS, compose_names=compose)


def test_a_question_that_names_a_speaker_is_encoded_once_and_its_vector_composed():
    real = backends.query_embedder("minilm")
    _name_vector.cache_clear()
    counting = Counting(real)
    question = "What did Caroline paint last week?"
    composed = _encode(question, counting, 0.6)
    assert counting.texts == ["What did paint last week?", "Caroline"]  # the question without the name, then the name once
    unnamed, name = real.encode(["What did paint last week?", "Caroline"])
    expected = (unnamed + 0.6 * name) / np.linalg.norm(unnamed + 0.6 * name)
    assert np.allclose(composed.vector, expected, atol=1e-5) and np.allclose(composed.unnamed_vector, unnamed, atol=1e-5)
    as_asked = real.encode([question])[0]
    assert float(composed.vector @ as_asked) > 0.8  # near the question encoded with the name, not the same
    counting.texts.clear()
    _encode("Where does Caroline live?", counting, 0.6)
    assert counting.texts == ["Where does live?"]  # the name's vector is kept


def test_without_composition_the_question_is_encoded_as_asked_too():
    real = backends.query_embedder("minilm")
    counting = Counting(real)
    question = "What did Caroline paint last week?"
    encoded = _encode(question, counting, 0.0)
    assert counting.texts == [question, "What did paint last week?"]
    assert np.allclose(encoded.vector, real.encode([question])[0], atol=1e-5)


def test_a_question_that_names_no_speaker_is_encoded_as_asked_either_way():
    real = backends.query_embedder("minilm")
    for compose in (0.0, 0.6):
        counting = Counting(real)
        query = _encode("Which device did I set up first, the thermostat or the router?", counting, compose)
        assert counting.texts[0] == "Which device did I set up first, the thermostat or the router?"
        assert query.unnamed_vector is None and len(query.parts) == 2  # and one question per event, encoded with it
        assert len(counting.texts) == 3
