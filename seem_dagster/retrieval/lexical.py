"""BM25 over passage texts (bm25s), the lexical signal beside the dense one."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def _stemmer(stems: bool):
    """The Snowball English stemmer (PyStemmer, compiled, no data files), or None for exact words. A new
    one per call: a PyStemmer object keeps a cache and is not safe to share between threads."""
    if not stems:
        return None
    import Stemmer

    return Stemmer.Stemmer("english")


class Bm25:
    """``stems``: a word matches by its Snowball stem ("camped" finds "camping", "activities" finds
    "activity"), as the English analysers of the usual search engines do; false: the exact word."""

    def __init__(self, texts: Sequence[str], stems: bool = True):
        import bm25s

        self._bm25s = bm25s
        self.stems = stems
        self.size = len(texts)
        self._model = None
        if texts:
            self._model = bm25s.BM25()
            tokens = bm25s.tokenize(list(texts), stopwords="en", stemmer=_stemmer(stems), show_progress=False)
            self._model.index(tokens, show_progress=False)

    def scores(self, query: str) -> np.ndarray:
        """One score per text, zero where no query term occurs."""
        if self._model is None:
            return np.zeros(self.size, dtype=np.float32)
        (tokens,) = self._bm25s.tokenize([query], stopwords="en", stemmer=_stemmer(self.stems), return_ids=False, show_progress=False)
        if not tokens:
            return np.zeros(self.size, dtype=np.float32)
        return np.asarray(self._model.get_scores(tokens), dtype=np.float32)
