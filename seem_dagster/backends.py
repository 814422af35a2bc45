"""Named extractors and embedders, built once per process (models take seconds to load)."""

from __future__ import annotations

from functools import lru_cache

from seem_dagster.embeddings.models import Embedder, get_embedder
from seem_dagster.episodic.extraction.interface import Extractor

EXTRACTORS = ("embedded",)


@lru_cache(maxsize=None)
def extractor(name: str = "embedded", processes: int = 1) -> Extractor:
    """``processes``: parse processes for a build's batches (extraction.parse_processes); queries parse
    one question at a time in this process."""
    if name == "embedded":
        from seem_dagster.episodic.extraction.embedded import EmbeddedExtractor

        return EmbeddedExtractor(processes=processes)
    raise ValueError(f"unknown extractor {name!r}; known: {', '.join(EXTRACTORS)} (a language model is chosen with --backend or the llm resource, not here)")


@lru_cache(maxsize=None)
def embedder(name: str = "minilm") -> Embedder:
    if name == "minilm-static":  # distilled from the MiniLM this process already loads
        from seem_dagster.embeddings.static import StaticMiniLMEmbedder

        return StaticMiniLMEmbedder(embedder("minilm"))
    return get_embedder(name)


@lru_cache(maxsize=None)
def query_embedder(name: str = "minilm") -> Embedder:
    """The embedder a query encodes its question with: for MiniLM its NumPy forward pass (the same
    vectors within float tolerance, without importing torch: a one-shot query starts in a fraction of
    the time); any other model, the build's."""
    if name == "minilm":
        from seem_dagster.embeddings.numpy_minilm import NumpyMiniLM

        return NumpyMiniLM()
    return embedder(name)
