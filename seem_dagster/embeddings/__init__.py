"""Embeddings behind one interface, loaded offline from installed packages, cached by text hash."""

from seem_dagster.embeddings.cache import CachedEmbedder
from seem_dagster.embeddings.models import Embedder, MiniLMEmbedder, get_embedder

__all__ = ["CachedEmbedder", "Embedder", "MiniLMEmbedder", "get_embedder"]
