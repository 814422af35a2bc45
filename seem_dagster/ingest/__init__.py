"""Ingestion: LoCoMo, LongMemEval and generic JSONL into validated passages and questions."""

from seem_dagster.ingest.conversation import Conversation
from seem_dagster.ingest.errors import InputError
from seem_dagster.ingest.load import FORMATS, load_input

__all__ = ["Conversation", "FORMATS", "InputError", "load_input"]
