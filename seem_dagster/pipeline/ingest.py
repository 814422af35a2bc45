"""The ingest step: a conversation read from the source registered for its next build."""

from __future__ import annotations

from seem_dagster.forgetting.tombstones import drop_forgotten
from seem_dagster.ingest import load_input
from seem_dagster.ingest.conversation import Conversation
from seem_dagster.store.sources import Source, source_to_build


def read_registered(root, conversation_id: str) -> tuple[Source, Conversation, int]:
    """The registration the next build reads (``source_to_build``), the conversation in its file now
    without its forgotten turns, and how many turns were left out for having been forgotten."""
    source = source_to_build(root, conversation_id)
    (conv,) = load_input(source.location(root), source.format, source.ingest, questions=source.questions_location(root),
                         conversations=[conversation_id])
    forgotten = drop_forgotten(root, conv)
    if conv.passages.is_empty():
        raise ValueError(f"conversation {conversation_id!r}: every turn of its input was forgotten; nothing to build")
    return source, conv, forgotten
