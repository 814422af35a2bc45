"""The static embedding distilled from the installed MiniLM (synonyms.embedder = minilm-static)."""

import numpy as np
import pytest

from seem_dagster import backends
from seem_dagster.config import SeemConfig
from seem_dagster.embeddings.static import StaticMiniLMEmbedder, distil
from seem_dagster.pipeline.graph import build_graph
from seem_dagster.schemas import Facts, table
from seem_dagster.store.cache import ConversationCache

pytestmark = pytest.mark.slow  # loads MiniLM

NAMES = ["adoption agency", "adoption agencies", "pottery class", "pottery", "Sweden", "camping trip"]


def small_table(embedder: StaticMiniLMEmbedder) -> np.ndarray:
    """The whole vocabulary's table would take minutes: distil only the tokens of NAMES, write it
    where the embedder looks, and leave every other row zero."""
    tokenizer, model, _ = embedder.teacher._loaded
    ids = sorted({i for row in tokenizer(NAMES, add_special_tokens=False)["input_ids"] for i in row})
    full = np.zeros((len(tokenizer.get_vocab()), embedder.dim), dtype=np.float32)
    full[ids] = distil(tokenizer, model, ids)
    path = embedder.table_path()
    path.parent.mkdir(parents=True)
    np.save(path, full)
    return full


def test_a_token_row_is_minilms_vector_of_that_token_alone(tmp_path):
    minilm = backends.embedder("minilm")
    tokenizer, model, _ = minilm._loaded
    (token,) = tokenizer(["sweden"], add_special_tokens=False)["input_ids"]
    assert len(token) == 1
    np.testing.assert_allclose(distil(tokenizer, model, token)[0], minilm.encode(["sweden"])[0], atol=1e-5)


def test_encodes_from_the_kept_table_normalised_and_related_names_closest(tmp_path):
    static = StaticMiniLMEmbedder(backends.embedder("minilm"), folder=tmp_path / "tables")
    small_table(static)
    vectors = static.encode(NAMES + [""])
    assert vectors.shape == (len(NAMES) + 1, static.dim) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors[:-1], axis=1), 1.0, rtol=1e-5)
    assert not vectors[-1].any()  # no token, no direction
    sims = vectors[:-1] @ vectors[:-1].T
    assert sims[0, 1] > max(sims[0, 2:]) and sims[2, 3] > max(sims[2, [0, 1, 4, 5]])
    assert np.array_equal(static.encode(NAMES[:2]), vectors[:2])  # a text's vector does not depend on its batch


def test_the_graph_step_embeds_entity_names_with_the_configured_embedder(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    backends.embedder.cache_clear()  # the static embedder reads its folder when it first loads
    try:
        small_table(backends.embedder("minilm-static"))
        rows = [{"fact_id": f"t_{i:016x}", "conversation_id": "c", "subject": "Ann", "relation": r, "object": o, "time": None,
                 "time_text": None, "passage_id": f"p{i}", "extractor": "hand"}
                for i, (r, o) in enumerate([("call", "adoption agency"), ("visit", "adoption agencies")])]
        config = SeemConfig.model_validate({"synonyms": {"embedder": "minilm-static", "threshold": 0.5}})
        built = build_graph(ConversationCache(tmp_path / "store", "c"), table(Facts, rows), config)
        synonyms = built.edges.filter(built.edges["kind"] == "synonym")
        assert synonyms.height == 1  # the two spellings of the agency, not Ann
        assert ConversationCache(tmp_path / "store", "c").table("embeddings", "all-MiniLM-L6-v2") is None  # MiniLM never ran
    finally:
        backends.embedder.cache_clear()
