"""A static embedding distilled from the installed MiniLM: one vector per vocabulary token, a text's
vector the normalised weighted sum of its tokens' vectors. No download: the table is MiniLM's own
output for each token alone, computed once (about 20 s on 2 quiet cores, minutes under load) and
kept in the user's cache folder. At load the table's mean is removed (the direction every token shares, which made unrelated
names score 0.6) and a token weighs log(2 + its vocabulary rank), so frequent pieces ("the", "a")
count less; on 20 entity names the pair cosines then correlate 0.88 with MiniLM's (0.56 without).

Encodes short strings (entity names) tens of thousands a second against a few hundred for MiniLM;
it knows no word order or context, so it is used where that matters little: entity names for the
synonym edges (``synonyms.embedder``, the default; docs/experiments.md has its speed and recall).
"""

from __future__ import annotations

import hashlib
import os
import warnings
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path

import numpy as np

from seem_dagster.embeddings.models import MiniLMEmbedder

DISTIL_VERSION = 1  # bump when the table's recipe changes: a new file is distilled
BATCH = 512


def cache_folder() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "seem-dagster" / "static-embeddings"


def distil(tokenizer, model, token_ids: Sequence[int]) -> np.ndarray:
    """(len(token_ids), dim) float32: MiniLM's mean-pooled, L2-normalised output for each token
    alone (with its [CLS] and [SEP], as a one-token text is embedded)."""
    import torch

    ids = np.asarray(list(token_ids), dtype=np.int64)
    out = np.zeros((len(ids), model.config.hidden_size), dtype=np.float32)
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    with torch.inference_mode():
        for start in range(0, len(ids), BATCH):
            chunk = torch.from_numpy(ids[start:start + BATCH])
            inputs = torch.stack([torch.full_like(chunk, cls), chunk, torch.full_like(chunk, sep)], dim=1)
            tokens = model(input_ids=inputs, attention_mask=torch.ones_like(inputs)).last_hidden_state
            out[start:start + len(chunk)] = torch.nn.functional.normalize(tokens.mean(1), p=2, dim=1).numpy()
    return out


class StaticMiniLMEmbedder:
    """Same interface as MiniLMEmbedder (``name``, ``dim``, ``encode``), vectors in the same space."""

    name = "all-MiniLM-L6-v2-static"
    dim = MiniLMEmbedder.dim

    def __init__(self, teacher: MiniLMEmbedder | None = None, folder: Path | None = None):
        self.teacher = teacher or MiniLMEmbedder()
        self.folder = folder

    def table_path(self) -> Path:
        """Where the distilled table of this teacher is kept: named by its weights and the recipe."""
        tokenizer, model, _ = self.teacher._loaded
        weights = next(model.parameters()).detach().numpy()
        key = weights.tobytes()[:1 << 20] + repr((len(tokenizer.get_vocab()), DISTIL_VERSION)).encode()
        return (self.folder or cache_folder()) / f"{hashlib.sha256(key).hexdigest()[:16]}.npy"

    @cached_property
    def _loaded(self):
        tokenizer, model, _ = self.teacher._loaded
        vocab = tokenizer.get_vocab()
        path = self.table_path()
        if path.exists():
            table = np.load(path)
        else:
            table = distil(tokenizer, model, range(len(vocab)))
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                partial = path.with_suffix(f".{os.getpid()}.tmp")
                with partial.open("wb") as f:
                    np.save(f, table)
                partial.replace(path)  # atomic: a concurrent process reads a whole table or distils its own
            except OSError as err:  # a read-only home (a locked-down container): this process keeps its own
                warnings.warn(f"the distilled static embedding table could not be kept in {path.parent} ({err}); "
                              "every process will distil it again (set XDG_CACHE_HOME to a writable folder)", stacklevel=2)
        weights = np.log(2.0 + np.arange(len(table), dtype=np.float32))
        return tokenizer, (table - table.mean(0)) * weights[:, None]

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        tokenizer, table = self._loaded
        for i, ids in enumerate(tokenizer(texts, add_special_tokens=False)["input_ids"]):
            if ids:
                total = table[ids].sum(0)
                out[i] = total / max(float(np.linalg.norm(total)), 1e-12)
        return out
