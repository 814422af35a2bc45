"""Assembles the Dagster definitions; `dagster dev`, `dg dev` and the CLI load `defs` from here."""

from __future__ import annotations

from dagster import Definitions

from seem_dagster.defs.assets.episodic import episodes, extract_frames
from seem_dagster.defs.assets.graph import build_graph, retrieval_index
from seem_dagster.defs.assets.ingest import ingest_conversation
from seem_dagster.defs.assets.query import retrieved_context
from seem_dagster.defs.checks import CHECKS
from seem_dagster.defs.jobs import build_memory, query_memory
from seem_dagster.defs.resources import LlmResource, MemorySettings, SeemSettings, SnapshotIOManager, default_inbox, default_store
from seem_dagster.defs.schedules import nightly_rebuild
from seem_dagster.defs.sensors import inbox_sensor


def build_defs(
    store_root: str | None = None, inbox: str | None = None, memory: MemorySettings | None = None,
    llm: LlmResource | None = None, **settings
) -> Definitions:
    store_root = store_root or default_store()
    return Definitions(
        assets=[ingest_conversation, extract_frames, episodes, build_graph, retrieval_index, retrieved_context],
        asset_checks=CHECKS,
        jobs=[build_memory, query_memory],
        sensors=[inbox_sensor],
        schedules=[nightly_rebuild],
        resources={
            "settings": SeemSettings(store_root=store_root, inbox=inbox or default_inbox(), **settings),
            "memory": memory or MemorySettings(),
            "llm": llm or LlmResource(),
            "snapshot_io_manager": SnapshotIOManager(store_root=store_root),
        },
    )


defs = build_defs()
