"""The configuration tree (``tree``) and how it is resolved from files, environment and flags (``resolve``)."""

from seem_dagster.config.resolve import (
    SETTINGS,
    ConfigError,
    Layer,
    Resolved,
    assignments_layer,
    defaults,
    file_layer,
    resolve,
    resolve_standard,
)
from seem_dagster.config.tree import (
    METHODS,
    EvaluationConfig,
    ExtractionConfig,
    FusionConfig,
    IngestConfig,
    LlmConfig,
    QueryConfig,
    RetrievalConfig,
    SeemConfig,
    StoreConfig,
    SynonymConfig,
)

__all__ = [
    "ConfigError", "EvaluationConfig", "ExtractionConfig", "FusionConfig", "IngestConfig", "Layer", "LlmConfig", "METHODS",
    "QueryConfig", "Resolved", "RetrievalConfig", "SETTINGS", "SeemConfig", "StoreConfig", "SynonymConfig",
    "assignments_layer", "defaults", "file_layer", "resolve", "resolve_standard",
]
