"""What shapes each table: the settings and code versions of its stage, as its snapshot records them.

A table's footer keeps ``stage_config(asset, ...)`` beside the fingerprints of the tables it was made
from, so the memory says what made it, and ``seem eval`` reuses a stored memory only when every
table's record equals what the current configuration would make.
"""

from __future__ import annotations

from seem_dagster import backends
from seem_dagster.config import SeemConfig
from seem_dagster.llm.prompts import fusion_judge, fusion_merge, passage
from seem_dagster.properties import vocabulary

SOURCE_ASSETS = ("passages", "questions")
# The tables of a whole memory (what a build publishes), and those made from it (query results),
# which a publish drops when the memory they were made from is replaced.
MEMORY_TABLES = ("passages", "questions", "event_frames", "facts", "properties", "llm_calls", "episodes", "entities", "graph_edges",
                 "retrieval_index")
QUERY_TABLES = ("retrieved_context",)
EXTRACTION_ASSETS = ("event_frames", "facts", "properties", "llm_calls")
# The ingest step's output metadata key for the source it read (its registration, with the
# fingerprint of the content actually read), which the ingest tables record.
SOURCE_RECORD = "source_record"
# Bump a stage's number when a change to its code changes what it writes, so memories made by the
# older code are not taken for current ones (the extractor and the prompts carry their own versions).
# tests/test_stage_code.py fails when the code below a stage changes and its number does not, until
# the change is recorded (tests/stage_code.json): a bump cannot be forgotten, only declined.
CODE_VERSIONS = {"ingest": 1, "extraction": 4, "episodes": 1, "entities": 1, "graph_edges": 2, "retrieval_index": 3,
                 "retrieved_context": 10}
# Settings of the sections that shape a memory which no stage's record holds, each with why: a change
# of one of these never makes a stored memory stale (tests/test_architecture.py checks every other is
# recorded). extraction.extractor and .embedder are recorded by the extractor's and model's names.
NOT_RECORDED = {
    "extraction.parse_processes": "the same extractions in any number of processes",
}
# The modules (a package: all of it) whose code decides what each stage writes.
STAGE_MODULES = {
    "ingest": ("seem_dagster.ingest", "seem_dagster.pipeline.ingest", "seem_dagster.forgetting.tombstones", "seem_dagster.ids"),
    "extraction": ("seem_dagster.episodic.extraction", "seem_dagster.pipeline.extract", "seem_dagster.pipeline.properties",
                   "seem_dagster.properties", "seem_dagster.llm"),
    "episodes": ("seem_dagster.episodic.tables", "seem_dagster.episodic.fusion", "seem_dagster.episodic.judges", "seem_dagster.pipeline.episodes",
                 "seem_dagster.embeddings", "seem_dagster.pipeline.embedding"),
    "entities": ("seem_dagster.graph.entities",),
    "graph_edges": ("seem_dagster.graph", "seem_dagster.pipeline.graph", "seem_dagster.embeddings"),
    "retrieval_index": ("seem_dagster.pipeline.index", "seem_dagster.retrieval.index", "seem_dagster.embeddings"),
    "retrieved_context": ("seem_dagster.retrieval",),
}


def code_digest(stage: str) -> str:
    """A digest of the code of a stage's modules: their syntax trees without docstrings, so a comment
    or a docstring changes nothing and any statement does."""
    import ast
    import hashlib
    import importlib.util
    from pathlib import Path

    files: list[Path] = []
    for name in STAGE_MODULES[stage]:
        spec = importlib.util.find_spec(name)
        if spec.submodule_search_locations:  # a package (with or without an __init__.py): all of it
            files += [p for folder in spec.submodule_search_locations for p in sorted(Path(folder).rglob("*.py"))]
        else:
            files.append(Path(spec.origin))
    digest = hashlib.blake2b(digest_size=16)
    for path in sorted(set(files)):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            body = getattr(node, "body", None)
            if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
        digest.update(path.name.encode() + ast.dump(tree, include_attributes=False).encode())
    return digest.hexdigest()


def _model(config: SeemConfig) -> dict:
    """The model settings that change what a reply says (not how it is fetched)."""
    llm = config.llm
    return {"backend": llm.backend, "model": llm.model, "response_format": llm.response_format,
            "max_tokens": llm.max_tokens, "temperature": llm.temperature, "reply_bounds": list(llm.reply_bounds)}


def _extractor(config: SeemConfig) -> str:
    ex = backends.extractor(config.extraction.extractor)
    return f"{ex.name} v{ex.version}"


def stage_config(asset: str, config: SeemConfig, source: dict | None = None) -> dict:
    """JSON-ready; ``source`` is the source record of the conversation (what the ingest tables keep)."""
    if asset in SOURCE_ASSETS:
        return {"code": CODE_VERSIONS["ingest"], "source": source}
    if asset in EXTRACTION_ASSETS:
        return {"code": CODE_VERSIONS["extraction"], **_extraction(config)}
    return {"code": CODE_VERSIONS[asset], **_stage(asset, config)}


def _extraction(config: SeemConfig) -> dict:
    properties = f"vocabulary v{vocabulary.VERSION}"
    if not config.llm.enabled:
        return {"extractor": _extractor(config), "properties": properties}
    return {"extractor": "llm", "llm": _model(config), "prompt": f"{passage.PROMPT.name} v{passage.PROMPT.version}",
            "fallback": _extractor(config), "properties": properties}


def _stage(asset: str, config: SeemConfig) -> dict:
    embedder = backends.embedder(config.extraction.embedder).name
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
        return {"embedder": embedder, "fact_vectors": config.extraction.fact_vectors}
    if asset == "retrieved_context":
        return {"embedder": embedder, "extractor": _extractor(config), "retrieval": config.retrieval.model_dump(mode="json"),
                "query": config.query.model_dump(mode="json"), "properties": config.properties.model_dump(mode="json"),
                "llm": _model(config) if config.llm.enabled else None}
    raise ValueError(f"no stage is known for asset {asset!r}")  # pragma: no cover (CODE_VERSIONS names every asset)
