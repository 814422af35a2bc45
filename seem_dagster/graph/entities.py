"""Entities from facts: exact merge on a normalised name, then synonym edges by embedding cosine.

Pure. Normalising first means "Mel", "mel" and "MEL" are one entity whatever the embeddings say;
synonym edges then link names that differ but embed close ("LGBTQ support group" / "support group").
On an increment only the new entities are compared with all; existing pairs are kept as they were.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from seem_dagster import ids
from seem_dagster.config import SynonymConfig
from seem_dagster.schemas import Entities, Facts, table

_ARTICLES = re.compile(r"^(the|a|an|my|his|her|their|our|your)\s+", re.IGNORECASE)


def normalise(name: str) -> str:
    text = name.strip().lower()
    text = re.sub(r"['’]s\b", "", text)
    text = re.sub(r"[^\w\s&+-]", " ", text)
    text = _ARTICLES.sub("", " ".join(text.split()))
    return text or name.strip().lower()


_SENTENCE_START = ".!?\"'“‘(:"


def is_proper_name(alias: str, texts: Sequence[str]) -> bool:
    """The alias is written with a capital inside a sentence in one of ``texts`` ("my neighbour Ines"),
    not only at the start of a sentence, where any word is ("Adoption is ...", "Your courage ...")."""
    if not alias[:1].isupper():
        return False
    pattern = re.compile(r"(?<!\w)" + re.escape(alias) + r"(?!\w)")
    for text in texts:
        for match in pattern.finditer(text):
            before = text[: match.start()].rstrip()
            if before and before[-1] not in _SENTENCE_START:
                return True
    return False


def entity_id(conversation_id: str, normalised: str) -> str:
    return "n_" + ids.stable_hash("entity", conversation_id, normalised)


def entities_from_facts(facts: pl.DataFrame) -> pl.DataFrame:
    """One row per normalised name across subjects and objects, with every spelling and passage."""
    aliases: dict[tuple[str, str], set[str]] = defaultdict(set)
    passages: dict[tuple[str, str], list[str]] = defaultdict(list)
    for row in facts.select(Facts.conversation_id, Facts.subject, Facts.object, Facts.passage_id).iter_rows():
        cid, subject, obj, pid = row
        for name in (subject, obj):
            key = (cid, normalise(name))
            aliases[key].add(name)
            if pid not in passages[key]:
                passages[key].append(pid)
    rows = []
    for (cid, norm), names in sorted(aliases.items()):
        ordered = sorted(names, key=lambda n: (-sum(c.isupper() for c in n), n))
        rows.append(
            {
                Entities.entity_id: entity_id(cid, norm),
                Entities.conversation_id: cid,
                Entities.name: ordered[0],
                Entities.aliases: sorted(names),
                Entities.passage_ids: passages[(cid, norm)],
            }
        )
    return table(Entities, rows)


@dataclass
class SynonymResult:
    edges: list[tuple[str, str, float]]
    comparisons: int


def synonym_edges(
    entity_ids: Sequence[str],
    vectors: np.ndarray,
    config: SynonymConfig,
    *,
    previous: Sequence[tuple[str, str, float]] = (),
    known: set[str] | None = None,
) -> SynonymResult:
    """Edges between entities whose name vectors have cosine >= threshold, at most ``max_per_node`` each.

    ``known`` are the entity ids already compared in an earlier run (their edges are ``previous``):
    only the new ids are compared, each against every entity. ``comparisons`` counts vector pairs scored.
    """
    known = known or set()
    index = {e: i for i, e in enumerate(entity_ids)}
    kept = [(a, b, w) for a, b, w in previous if a in index and b in index]
    new = [i for i, e in enumerate(entity_ids) if e not in known]
    degree: dict[str, int] = defaultdict(int)
    for a, b, _ in kept:
        degree[a] += 1
        degree[b] += 1
    added, comparisons = new_synonyms(new, entity_ids, vectors, config, known, degree)
    return SynonymResult(sorted(kept + added), comparisons)


def new_synonyms(new: Sequence[int], entity_ids: Sequence[str], vectors: np.ndarray, config: SynonymConfig, known,
                 degree: dict[str, int]) -> tuple[list[tuple[str, str, float]], int]:
    """The edges of the entities at positions ``new`` (compared with every entity; ``known``: the ids
    compared before, anything with ``in``), given each entity's ``degree`` so far (updated); and the
    vector pairs scored. ``synonym_edges`` is this after the kept edges; an append calls it alone."""
    edges: list[tuple[str, str, float]] = []
    if not new:
        return edges, 0
    # In float64, then rounded to float32: a float32 product's last bits depend on the shape BLAS is
    # given (new x all), so comparing a few new entities (an append, a new session) would give other
    # weights than comparing all of them at once; rounded from float64 they are the same.
    sims = (vectors[list(new)].astype(np.float64) @ vectors.T.astype(np.float64)).astype(np.float32)  # new x all
    candidates = []
    for row, i in enumerate(new):
        for j in np.nonzero(sims[row] >= config.threshold)[0]:
            if j == i or (entity_ids[j] not in known and j < i):
                continue  # self, or a new-new pair seen from the other side
            candidates.append((float(sims[row, j]), entity_ids[i], entity_ids[j]))
    for weight, a, b in sorted(candidates, key=lambda c: (-c[0], c[1], c[2])):
        if degree[a] < config.max_per_node and degree[b] < config.max_per_node:
            a, b = sorted((a, b))
            edges.append((a, b, weight))
            degree[a] += 1
            degree[b] += 1
    return edges, int(sims.size)
