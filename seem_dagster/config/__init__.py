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
    AgentConfig,
    EvaluationConfig,
    ExecutionConfig,
    ExtractionConfig,
    FusionConfig,
    IngestConfig,
    LlmConfig,
    PropertiesConfig,
    QueryConfig,
    RetrievalConfig,
    SeemConfig,
    SqlConfig,
    StoreConfig,
    SynonymConfig,
)

__all__ = [
    "AgentConfig", "PropertiesConfig", "SqlConfig",
    "ConfigError", "EvaluationConfig", "ExecutionConfig", "ExtractionConfig", "FusionConfig", "IngestConfig", "Layer", "LlmConfig",
    "QueryConfig", "Resolved", "RetrievalConfig", "SETTINGS", "SeemConfig", "StoreConfig", "SynonymConfig",
    "assignments_layer", "defaults", "file_layer", "resolve", "resolve_standard",
]
