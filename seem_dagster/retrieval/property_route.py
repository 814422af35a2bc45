"""Properties as a second route to passages (a method of the evaluation, off by default).

The question's best-matching properties (scored by the vector of the fact each came from) bring the
passages of their whole (entity, property) history: for a single-valued property the current value
first and then what it superseded (a knowledge update's evidence is the latest statement, which the
question's words often match less than the older one); for a multi-valued one every accumulated
value, best match first (an activity named in several sessions). The route's ranking is fused with
SEEM's by weighted reciprocal rank.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from seem_dagster.config import PropertiesConfig
from seem_dagster.retrieval.index import MemoryIndex
from seem_dagster.retrieval.search import score_facts
from seem_dagster.schemas import Facts, Properties

PER_HISTORY = 5  # passages one history brings at most
RRF_K = 60


def property_ranking(index: MemoryIndex, question: np.ndarray, query_facts: np.ndarray, config: PropertiesConfig) -> list[str]:
    props = index.properties
    if props is None or props.height == 0 or index.facts.height == 0:
        return []
    fact_scores = score_facts(index, question, query_facts)
    row_of = {f: i for i, f in enumerate(index.facts[Facts.fact_id].to_list())}
    scores = np.array([fact_scores[row_of[s]] if s in row_of else 0.0 for s in props[Properties.source].to_list()])
    scored = props.with_columns(pl.Series("_score", scores))
    best = scored.filter(pl.col("_score") >= config.route_min_score).sort("_score", descending=True)
    groups = best.select(Properties.entity_id, Properties.property).unique(maintain_order=True).head(config.route_properties)
    ranking: list[str] = []
    for eid, prop in groups.iter_rows():
        history = scored.filter((pl.col(Properties.entity_id) == eid) & (pl.col(Properties.property) == prop))
        current = pl.col(Properties.valid_to).is_null() & pl.col(Properties.single_valued)
        history = history.sort([current, Properties.valid_from, "_score"], descending=[True, True, True])
        for pid in history[Properties.passage_id].unique(maintain_order=True).head(PER_HISTORY).to_list():
            if pid not in ranking:
                ranking.append(pid)
    return ranking


def fuse(seem: list[str], route: list[str], weight: float, k: int = RRF_K) -> list[str]:
    """SEEM's ranking and the route's by weighted reciprocal rank (ties keep SEEM's order)."""
    score = {p: 1.0 / (k + r) for r, p in enumerate(seem, start=1)}
    for r, p in enumerate(route, start=1):
        score[p] = score.get(p, 0.0) + weight / (k + r)
    order = {p: i for i, p in enumerate(seem)}
    return sorted(score, key=lambda p: (-score[p], order.get(p, len(order))))
