"""A conversation's text-hash vector cache, shared by every step that embeds (frames, entity names,
passages, facts), so a text is embedded once per conversation whatever step meets it first."""

from __future__ import annotations

from seem_dagster import backends
from seem_dagster.embeddings import CachedEmbedder
from seem_dagster.embeddings.cache import HASH
from seem_dagster.store.cache import ConversationCache

KIND = "embeddings"


def cached_embedder(cache: ConversationCache, name: str) -> CachedEmbedder:
    base = backends.embedder(name)
    return CachedEmbedder(base, cache.table(KIND, base.name))


def save_vectors(cache: ConversationCache, embedder: CachedEmbedder) -> None:
    """Only the vectors this step embedded are written (the cache is appended to, not rewritten)."""
    if embedder.added:
        cache.append_rows(KIND, embedder.name, embedder.table(new_only=True), HASH)
