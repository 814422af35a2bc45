"""Open one conversation's memory from a store: one consistent snapshot of every table retrieval reads."""

from __future__ import annotations

from seem_dagster.retrieval.index import MemoryIndex
from seem_dagster.store.snapshot import read_published

TABLES = ["passages", "facts", "entities", "episodes", "graph_edges", "retrieval_index", "properties"]


def load_index(store, conversation_id: str) -> MemoryIndex:
    return load_published_index(store, conversation_id)[0]


def load_published_index(store, conversation_id: str) -> tuple[MemoryIndex, dict | None]:
    """The index and the manifest its tables were read through (None: a store written before manifests)."""
    t, manifest = read_published(store, conversation_id, TABLES)
    return index_of(t), manifest


def index_of(t: dict) -> MemoryIndex:
    """The index of a memory's tables (TABLES)."""
    index = MemoryIndex.from_tables(t["passages"], t["facts"], t["entities"], t["episodes"], t["graph_edges"], t["retrieval_index"])
    index.properties = t["properties"]
    return index
