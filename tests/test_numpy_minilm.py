"""The question's encoder without torch: MiniLM's forward pass in NumPy gives the torch model's vectors
within float tolerance, for short, long (truncated) and odd texts, and never imports torch."""

from __future__ import annotations

import subprocess
import sys

import numpy as np

TEXTS = [
    "What did Caroline research about adoption agencies last year?",
    "When did Melanie paint a sunrise?",
    "Hi",
    "naïve café – “quotes” and emoji 🎨, numbers 3.14 and #hashtags",
    "word " * 400,  # past the model's 256 tokens: truncated alike
    "What is the order of the three events: 'I signed up for the rewards program at ShopRite', 'I used a coupon at Walmart', "
    "and 'I redeemed $12 cashback'?",
]


def test_numpy_vectors_equal_the_torch_models_within_float_tolerance():
    from seem_dagster.embeddings.models import MiniLMEmbedder
    from seem_dagster.embeddings.numpy_minilm import NumpyMiniLM

    fast, torch_model = NumpyMiniLM(), MiniLMEmbedder()
    a, b = fast.encode(TEXTS), torch_model.encode(TEXTS)
    assert a.shape == b.shape == (len(TEXTS), 384) and a.dtype == np.float32
    assert np.abs(a - b).max() < 1e-5
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-6)
    assert fast.name == torch_model.name  # the same vectors: the same caches and build records
    assert fast.encode([]).shape == (0, 384)


def test_encoding_a_question_never_imports_torch():
    code = ("import sys; from seem_dagster import backends; v = backends.query_embedder('minilm').encode(['Where does Tomas live?']); "
            "print(v.shape, 'torch' in sys.modules, 'transformers' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "(1, 384) False False"
