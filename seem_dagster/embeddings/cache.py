"""Vectors cached by text hash, so nothing is embedded twice (within a run or across rebuilds)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from seem_dagster import ids
from seem_dagster.embeddings.models import Embedder

HASH = "text_hash"
VECTOR = "vector"


def text_hash(text: str) -> str:
    return ids.stable_hash("text", text, length=32)


class CachedEmbedder:
    def __init__(self, embedder: Embedder, cached: pl.DataFrame | None = None):
        self.embedder = embedder
        self.name = embedder.name
        self.dim = embedder.dim
        self._vectors: dict[str, np.ndarray] = {}
        if cached is not None and cached.height:
            matrix = cached[VECTOR].to_numpy()
            self._vectors = dict(zip(cached[HASH].to_list(), matrix))
        self.hits = 0
        self.misses = 0
        self._new: set[str] = set()

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        hashes = [text_hash(t) for t in texts]
        todo: dict[str, str] = {}
        for h, t in zip(hashes, texts):
            if h in self._vectors or h in todo:
                self.hits += 1
            else:
                todo[h] = t
        if todo:
            self.misses += len(todo)
            fresh = self.embedder.encode(list(todo.values()))
            for h, v in zip(todo, fresh):
                self._vectors[h] = v
                self._new.add(h)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._vectors[h] for h in hashes]).astype(np.float32, copy=False)

    @property
    def added(self) -> int:
        return len(self._new)

    def table(self, new_only: bool = False) -> pl.DataFrame:
        """Every vector known (old and new), or only those embedded since this cache was loaded (what
        the next run does not have yet)."""
        keys = sorted(self._new if new_only else self._vectors)
        matrix = np.stack([self._vectors[k] for k in keys]) if keys else np.zeros((0, self.dim), dtype=np.float32)
        return pl.DataFrame(
            {HASH: keys, VECTOR: matrix}, schema={HASH: pl.String(), VECTOR: pl.Array(pl.Float32(), self.dim)}
        )
