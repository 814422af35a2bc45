"""What the evaluation prepares for a method beyond the memory it ranks: the reranker's held-out folds
and, for the ablation that needs them, the facts embedded alone. A memory never reads either.

**Held-out folds.** The bundled reranker (retrieval/rerank_model.json) was fitted on the LoCoMo dev
conversations. A memory is reranked with the model fitted on all of them; the evaluation reranks a
conversation the model saw with the one fitted without it (kept in the same file), so no figure
comes from a model that saw its answers. The folds are read once per evaluation.

**Facts embedded alone.** The build pools most facts' vectors from their passage's forward pass;
the registry's ``EMBEDDED_FACT_VECTORS`` methods rank with every fact embedded alone instead, as
facts were before. Those vectors go through the conversation's vector cache, so the next evaluation
of the same memory embeds none of them again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from seem_dagster import methods as registry
from seem_dagster.retrieval.index import MemoryIndex, fact_text
from seem_dagster.retrieval.rerank import BASES, RerankModel, held_out_models
from seem_dagster.schemas import Facts, Passages


def conversation_of(index: MemoryIndex) -> str:
    return index.passages[Passages.conversation_id][0] if index.passages.height else ""


@dataclass
class Prepared:
    """Per conversation, what the evaluated methods read besides the memory: ``folds`` (base ranking
    -> conversation -> the reranker fitted without it) and ``fact_vectors_alone`` (conversation ->
    every fact's vector embedded alone, in the facts' row order)."""

    folds: dict[str, dict[str, RerankModel]] = field(default_factory=dict)
    fact_vectors_alone: dict[str, np.ndarray] = field(default_factory=dict)

    @classmethod
    def for_methods(cls, methods: Sequence[str], reranks: bool) -> Prepared:
        """What ``methods`` need, folds read once when any of them reranks (``reranks``)."""
        return cls(folds={base: held_out_models(base) for base in BASES} if reranks else {})

    def rerankers(self, index: MemoryIndex) -> dict[str, RerankModel]:
        """The reranker models for ``index``'s conversation: the folds that never saw it, where it was
        fitted on (retrieval falls back to the bundled models for the others)."""
        cid = conversation_of(index)
        return {base: folds[cid] for base, folds in self.folds.items() if cid in folds}

    def needs_fact_vectors(self, methods: Sequence[str]) -> bool:
        return any(registry.EMBEDDED_FACT_VECTORS in registry.get(m).needs for m in methods)

    def embed_facts_alone(self, index: MemoryIndex, embedder) -> None:
        """Every fact of ``index`` embedded alone by ``embedder`` (one with a cache, saved by the caller)."""
        rows = index.facts.select(Facts.subject, Facts.relation, Facts.object).iter_rows()
        self.fact_vectors_alone[conversation_of(index)] = embedder.encode([fact_text(*r) for r in rows])

    def drop(self, conversation_id: str) -> None:
        """Forget what was prepared for a conversation the evaluation is done with."""
        self.fact_vectors_alone.pop(conversation_id, None)
