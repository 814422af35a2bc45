"""The graph: entity and passage nodes; fact, mention and synonym edges. Stored as an edge table,
rebuilt into an undirected igraph Graph on load (milliseconds for a conversation; no pickles)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import polars as pl

from seem_dagster.graph.entities import entity_id, normalise
from seem_dagster.schemas import Facts, GraphEdges, Passages, table

if TYPE_CHECKING:
    import igraph as ig

FACT, MENTION, SYNONYM = "fact", "mention", "synonym"


def graph_edges(facts: pl.DataFrame, synonyms: Sequence[tuple[str, str, float]]) -> pl.DataFrame:
    fact_counts: Counter = Counter()
    mention_counts: Counter = Counter()
    for cid, subject, obj, pid in facts.select(Facts.conversation_id, Facts.subject, Facts.object, Facts.passage_id).iter_rows():
        s, o = entity_id(cid, normalise(subject)), entity_id(cid, normalise(obj))
        if s != o:
            fact_counts[tuple(sorted((s, o)))] += 1
        mention_counts[(pid, s)] += 1
        if o != s:
            mention_counts[(pid, o)] += 1
    rows = [(a, b, FACT, float(n)) for (a, b), n in sorted(fact_counts.items())]
    rows += [(p, e, MENTION, float(n)) for (p, e), n in sorted(mention_counts.items())]
    rows += [(a, b, SYNONYM, float(w)) for a, b, w in synonyms]
    return table(GraphEdges, rows, orient="row")


@dataclass
class MemoryGraph:
    graph: ig.Graph  # (igraph is imported when a graph is first built: a build never needs it)
    index: dict[str, int]  # node id -> vertex index
    passage_ids: list[str]  # vertices 0..len-1, in this order
    _without_synonyms: ig.Graph | None = None

    def walked(self, synonyms: bool = True) -> ig.Graph:
        """The graph the walk runs on: all of it, or without the synonym edges (same vertices), the
        ablation of the synonym part on the same memory."""
        if synonyms:
            return self.graph
        if self._without_synonyms is None:
            keep = [e.index for e in self.graph.es if e["kind"] != SYNONYM]
            self._without_synonyms = self.graph.subgraph_edges(keep, delete_vertices=False)
        return self._without_synonyms


def to_igraph(passages: pl.DataFrame, entity_ids: Sequence[str], edges: pl.DataFrame) -> MemoryGraph:
    """Vertices: every passage (so the dense share reaches turns without facts), then every entity."""
    import igraph as ig

    passage_ids = passages[Passages.passage_id].to_list()
    names = passage_ids + list(entity_ids)
    index = {n: i for i, n in enumerate(names)}
    src = [index[s] for s in edges[GraphEdges.source].to_list()]
    dst = [index[t] for t in edges[GraphEdges.target].to_list()]
    graph = ig.Graph(n=len(names), edges=list(zip(src, dst)), directed=False)
    graph.vs["name"] = names
    graph.es["weight"] = edges[GraphEdges.weight].to_list()
    graph.es["kind"] = edges[GraphEdges.kind].to_list()
    return MemoryGraph(graph, index, passage_ids)
