"""The public API: `Memory` and what it takes and returns (``from seem_dagster import Memory``)."""

from seem_dagster.memory.api import Memory
from seem_dagster.memory.errors import BuildFailed, InvalidRequest, UnknownConversation
from seem_dagster.memory.records import Added, Forgotten, Hit, Recall, SeedFact, Turn
from seem_dagster.memory.writes import WriterBusy

__all__ = ["Added", "BuildFailed", "Forgotten", "Hit", "InvalidRequest", "Memory", "Recall", "SeedFact", "Turn", "UnknownConversation", "WriterBusy"]
