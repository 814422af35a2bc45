"""The Dagster face of the configuration tree: one resource, ``seem``, and the snapshot IO manager.

``seem`` is the resolved ``SeemConfig``. Its base is what the definitions were built with (defaults,
``SEEM_CONFIG``, the environment, or what `seem build --config/--set` resolved); a run's config
for the resource (``resources: {seem: {config: {retrieval: {top_facts: 8}}}}``) goes on top. Every
setting of the tree is a field of that run config, typed and described, generated from the tree
itself, so nothing is copied here (but for the few settings ``NOT_PER_RUN`` keeps out).
"""

from __future__ import annotations

import types
import typing

from dagster import Array, Bool, Field, Float, Int, Noneable, ResourceDefinition, Shape, String, io_manager, resource
from upath import UPath

from seem_dagster.config import SETTINGS, ConfigError, Layer, Resolved
from seem_dagster.config.resolve import SECTIONS, flatten
from seem_dagster.defs.io_manager import ParquetSnapshotIOManager

RUN_CONFIG = "dagster run config"
# Not in a run's config: ingest options are fixed when a conversation is registered (every rebuild
# reads it the same way), the inbox is the sensor's, how long a writer waits is `Memory`'s (runs take no
# writer lock), the evaluation is `seem eval`'s, the executor is
# chosen when the definitions are built (every worker must agree on it), and which
# environment variable holds the API key stays with whoever runs the code location: a run config
# that could name it could send any of the worker's secrets to any base_url.
NOT_PER_RUN = ("ingest.", "store.inbox", "store.writer_wait_s", "evaluation.", "llm.api_key_env", "execution.")
_SCALARS = {bool: Bool, int: Int, float: Float, str: String}


def _dagster_type(annotation):
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        (inner,) = [a for a in args if a is not type(None)]
        return Noneable(_dagster_type(inner))
    if origin is typing.Literal:
        return String
    if origin in (tuple, list):
        return Array(_dagster_type(args[0]))
    return _SCALARS[annotation]


def run_config_schema() -> dict:
    """Every setting a run can change, as an optional field (no Dagster default: an unset field keeps
    the base value); Dagster refuses the others as unknown fields."""
    sections = {}
    for section in SECTIONS:
        fields = {}
        for key, s in SETTINGS.items():
            if key.startswith(section + ".") and not key.startswith(NOT_PER_RUN):
                default = list(s.default) if isinstance(s.default, tuple) else s.default
                fields[key.split(".", 1)[1]] = Field(_dagster_type(s.annotation), is_required=False,
                                                     description=f"{s.description} (default {default!r})")
        if fields:
            sections[section] = Field(Shape(fields), is_required=False)
    return sections


def seem_resource(base: Resolved) -> ResourceDefinition:
    @resource(config_schema=run_config_schema(),
              description="seem-dagster's configuration tree (`seem config show` prints it); run config overrides any setting")
    def seem(context):
        overrides = context.resource_config or {}
        if not overrides:
            return base.config
        try:
            return base.over(Layer(RUN_CONFIG, flatten(overrides, RUN_CONFIG))).config
        except ConfigError as err:
            raise ConfigError(f"resource seem: {err}") from None

    return seem


@io_manager(required_resource_keys={"seem"},
            description="Parquet snapshots under store.root, one file per asset per conversation, each with its build record")
def snapshot_io_manager(init_context) -> ParquetSnapshotIOManager:
    config = init_context.resources.seem
    return ParquetSnapshotIOManager(UPath(config.store.root), config)
