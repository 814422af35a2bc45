"""A property as an extractor states it, before the property memory links and dates it (derive.py)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class StatedProperty:
    """An entity's property as a language model states it (the embedded extractor leaves these
    empty: its properties are derived from its facts)."""

    entity: str
    property: str
    value: str
    dtype: str | None = None
    time: str | None = None
