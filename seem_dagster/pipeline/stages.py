"""What shapes each table: the settings and code versions of its stage, as its snapshot records them.

A table's footer keeps ``stage_config(asset, ...)`` beside the fingerprints of the tables it was made
from, so the memory says what made it, and ``seem eval`` reuses a stored memory only when every
table's record equals what the current configuration would make.
"""

from __future__ import annotations

from seem_dagster import backends
from seem_dagster.config import SeemConfig
from seem_dagster.llm.prompts import fusion_judge, fusion_merge, passage
from seem_dagster.store.sources import Source

SOURCE_ASSETS = ("passages", "questions")
EXTRACTION_ASSETS = ("event_frames", "facts", "llm_calls")


def _model(config: SeemConfig) -> dict:
    """The model settings that change what a reply says (not how it is fetched)."""
    llm = config.llm
    return {"backend": llm.backend, "model": llm.model, "response_format": llm.response_format,
            "max_tokens": llm.max_tokens, "temperature": llm.temperature}


def _extractor(config: SeemConfig) -> str:
    ex = backends.extractor(config.extraction.extractor)
    return f"{ex.name} v{ex.version}"


def stage_config(asset: str, config: SeemConfig, source: Source | None = None) -> dict:
    """JSON-ready; ``source`` is the conversation's registration (what the ingest tables record)."""
    embedder = backends.embedder(config.extraction.embedder).name
    if asset in SOURCE_ASSETS:
        return {"source": source.to_json() if source is not None else None}
    if asset in EXTRACTION_ASSETS:
        if not config.llm.enabled:
            return {"extractor": _extractor(config)}
        return {"extractor": "llm", "llm": _model(config), "prompt": f"{passage.PROMPT.name} v{passage.PROMPT.version}",
                "fallback": _extractor(config)}
    if asset == "episodes":
        stage = {"embedder": embedder, "fusion": config.fusion.model_dump(mode="json")}
        if config.llm.enabled:
            stage |= {"llm": _model(config), "prompts": [f"{p.name} v{p.version}" for p in (fusion_judge.PROMPT, fusion_merge.PROMPT)]}
        return stage
    if asset == "entities":
        return {}
    if asset == "graph_edges":
        return {"embedder": embedder, "synonyms": config.synonyms.model_dump(mode="json")}
    if asset == "retrieval_index":
        return {"embedder": embedder}
    if asset == "retrieved_context":
        return {"embedder": embedder, "extractor": _extractor(config), "retrieval": config.retrieval.model_dump(mode="json"),
                "query": config.query.model_dump(mode="json"), "llm": _model(config) if config.llm.enabled else None}
    raise ValueError(f"no stage is known for asset {asset!r}")
