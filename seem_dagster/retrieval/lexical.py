"""BM25 over passage texts (bm25s), the lexical signal beside the dense one."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class Bm25:
    def __init__(self, texts: Sequence[str]):
        import bm25s

        self._bm25s = bm25s
        self.size = len(texts)
        self._model = None
        if texts:
            self._model = bm25s.BM25()
            self._model.index(bm25s.tokenize(list(texts), stopwords="en", show_progress=False), show_progress=False)

    def scores(self, query: str) -> np.ndarray:
        """One score per text, zero where no query term occurs."""
        if self._model is None:
            return np.zeros(self.size, dtype=np.float32)
        (tokens,) = self._bm25s.tokenize([query], stopwords="en", return_ids=False, show_progress=False)
        if not tokens:
            return np.zeros(self.size, dtype=np.float32)
        return np.asarray(self._model.get_scores(tokens), dtype=np.float32)
