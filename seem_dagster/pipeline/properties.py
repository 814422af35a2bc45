"""The properties step (inside extraction: one model call per passage gives its frame, facts and
properties): derive the table, then compare it with what the last build of the same settings wrote,
so the build says what it appended and closed, and whether any earlier row was withdrawn."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import polars as pl

from seem_dagster.properties import vocabulary
from seem_dagster.properties.derive import HistoryReport, compare, derive_properties
from seem_dagster.properties.stated import StatedProperty
from seem_dagster.store.cache import ConversationCache

KIND = "properties"


@dataclass
class PropertiesBuilt:
    table: pl.DataFrame
    history: HistoryReport


def build_properties(cache: ConversationCache, facts: pl.DataFrame, passages: pl.DataFrame, extractor: str,
                     stated: Mapping[str, Sequence[StatedProperty]] | None = None) -> PropertiesBuilt:
    """``extractor`` names what made the facts (and the stated properties): the last build's table is
    only compared with one made the same way."""
    name = f"{extractor}-vocabulary-v{vocabulary.VERSION}"
    table = derive_properties(facts, passages, stated)
    before = cache.table(KIND, name)
    history = compare(before, table)
    cache.put_table(KIND, name, table, stored=before)  # an unchanged table is not written again
    return PropertiesBuilt(table, history)
