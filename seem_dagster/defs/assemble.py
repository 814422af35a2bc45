"""Build the Dagster definitions over one resolved configuration (the CLI, tests and `dagster dev`).

A run whose steps leave the launching process (executor ``multiprocess``) reloads the definitions
in every step process through ``launched_defs``: the launcher puts the settings it resolved (flags
and ``--set`` included) in ``SEEM_LAUNCHED_CONFIG``, so each step process builds the same ones.
"""

from __future__ import annotations

import json
import os

from dagster import Definitions

from seem_dagster.config import SETTINGS, Layer, Resolved, resolve, resolve_standard
from seem_dagster.defs.assets.episodic import episodes, extract_frames
from seem_dagster.defs.assets.graph import build_graph, retrieval_index
from seem_dagster.defs.assets.ingest import ingest_conversation
from seem_dagster.defs.assets.publish import memory
from seem_dagster.defs.assets.query import retrieved_context
from seem_dagster.defs.executors import executor_for
from seem_dagster.defs.jobs import build_memory, query_memory
from seem_dagster.defs.resources import seem_resource, snapshot_io_manager
from seem_dagster.defs.schedules import nightly_rebuild
from seem_dagster.defs.sensors import compaction_sensor, inbox_sensor


def build_defs(config: Resolved | None = None) -> Definitions:
    """``config``: the resolved tree (default: defaults < SEEM_CONFIG file < SEEM_* environment)."""
    config = config or resolve_standard()
    return Definitions(
        assets=[ingest_conversation, extract_frames, episodes, build_graph, retrieval_index, retrieved_context, memory],
        jobs=[build_memory, query_memory],
        sensors=[inbox_sensor, compaction_sensor],
        schedules=[nightly_rebuild],
        resources={"seem": seem_resource(config), "snapshot_io_manager": snapshot_io_manager},
        # execution.executor; its default is one process per run, not one per step: every step process
        # would import Dagster and this package and load spaCy and MiniLM again. Measured on the sample
        # through `dagster job execute`: an unchanged rebuild 60 s -> 7 s, a full build 102 s -> 27 s
        # (docs/experiments.md). Runs of different conversations still run side by side.
        executor=executor_for(config.config.execution),
    )


LAUNCHED_ENV = "SEEM_LAUNCHED_CONFIG"


def launched_environment(config: Resolved) -> dict[str, str]:
    """The variable that makes ``launched_defs`` resolve ``config`` in a step process: every value
    that is not the default, as JSON."""
    values = {}
    for key in SETTINGS:
        if config.source(key) != "default":
            value = config.value(key)
            values[key] = list(value) if isinstance(value, tuple) else value
    return {LAUNCHED_ENV: json.dumps(values)}


def launched_config() -> Resolved:
    """What the launcher resolved when it set ``SEEM_LAUNCHED_CONFIG``, else the standard resolution."""
    text = os.environ.get(LAUNCHED_ENV)
    if not text:
        return resolve_standard()
    return resolve([Layer(f"the launching process ({LAUNCHED_ENV})", json.loads(text))])


def launched_defs() -> Definitions:
    """The definitions a step process rebuilds, with the launcher's settings."""
    return build_defs(launched_config())


def launched_job(name: str):
    """The reconstruction target of out-of-process runs (``launch.reconstructable``): the job ``name``
    of ``launched_defs``."""
    return launched_defs().resolve_job_def(name)
