"""Vectors cached by text hash, so nothing is embedded twice (within a run or across rebuilds)."""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
import polars as pl

from seem_dagster import ids
from seem_dagster.embeddings.models import Embedder, Ranges

HASH = "text_hash"
VECTOR = "vector"


def text_hash(text: str) -> str:
    return ids.stable_hash("text", text, length=32)


def span_hash(text: str, ranges: Ranges) -> str:
    """The cache key of a span of ``text`` pooled from the text's forward pass (encode_pooled)."""
    return ids.stable_hash("span", text, json.dumps([list(r) for r in ranges]), length=32)


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

    def encode_pooled(self, texts: Sequence[str], spans: Sequence[Sequence[Ranges]]) -> tuple[np.ndarray, list[list[np.ndarray | None]]]:
        """``encode`` plus, per text, its spans pooled from its forward pass (the model's
        ``encode_pooled``), all cached: a text runs through the model again only when its vector or one
        of its spans is missing. A span the model found no token for is kept as a zero vector, so it is
        not asked again, and returned as None; with a model that cannot pool, every span is None."""
        pool = getattr(self.embedder, "encode_pooled", None)
        if pool is None:
            return self.encode(texts), [[None] * len(s) for s in spans]
        keys = [[span_hash(t, r) for r in s] for t, s in zip(texts, spans)]
        todo: dict[str, tuple[str, list[Ranges], list[str]]] = {}
        for t, s, k in zip(texts, spans, keys):
            h = text_hash(t)
            missing = [(r, key) for r, key in zip(s, k) if key not in self._vectors]
            if h in self._vectors and not missing:
                self.hits += 1
                continue
            entry = todo.setdefault(h, (t, [], []))
            for r, key in missing:
                if key not in entry[2]:
                    entry[1].append(r)
                    entry[2].append(key)
        if todo:
            self.misses += len(todo)
            fresh, pooled = pool([t for t, _, _ in todo.values()], [r for _, r, _ in todo.values()])
            for (h, (_, _, span_keys)), v, vs in zip(todo.items(), fresh, pooled):
                if h not in self._vectors:
                    self._vectors[h] = v
                    self._new.add(h)
                for key, pv in zip(span_keys, vs):
                    self._vectors[key] = pv if pv is not None else np.zeros(self.dim, dtype=np.float32)
                    self._new.add(key)
        vectors = (np.stack([self._vectors[text_hash(t)] for t in texts]).astype(np.float32, copy=False) if texts
                   else np.zeros((0, self.dim), dtype=np.float32))
        return vectors, [[v if (v := self._vectors[key]).any() else None for key in k] for k in keys]

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
