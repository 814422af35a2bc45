"""Open one conversation's memory from a store: one consistent snapshot of every table retrieval reads."""

from __future__ import annotations

from seem_dagster.retrieval.index import MemoryIndex
from seem_dagster.store.snapshot import read_snapshot

TABLES = ["passages", "facts", "entities", "episodes", "graph_edges", "retrieval_index", "properties"]


def load_index(store, conversation_id: str) -> MemoryIndex:
    t = read_snapshot(store, conversation_id, TABLES)
    index = MemoryIndex.from_tables(t["passages"], t["facts"], t["entities"], t["episodes"], t["graph_edges"], t["retrieval_index"])
    index.properties = t["properties"]
    return index
