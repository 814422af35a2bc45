"""Conversation ids become partition keys and file names: validate them, and encode them safely."""

from __future__ import annotations

import re
import unicodedata

from seem_dagster import ids

MAX_ID_CHARS = 200
_SAFE_STEM = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,119}$")


class InvalidConversationId(ValueError):
    pass


def check_conversation_id(conversation_id: object) -> str:
    """Reject ids no file name or Dagster partition key can carry: empty, control characters, absurd length."""
    if not isinstance(conversation_id, str):
        raise InvalidConversationId(f"conversation id must be a string, got {type(conversation_id).__name__}")
    if not conversation_id.strip():
        raise InvalidConversationId("conversation id is empty")
    if len(conversation_id) > MAX_ID_CHARS:
        raise InvalidConversationId(
            f"conversation id is {len(conversation_id)} characters, over the limit of {MAX_ID_CHARS}"
        )
    bad = [c for c in conversation_id if unicodedata.category(c) in ("Cc", "Cf", "Cs", "Co", "Cn")]
    if bad:
        kind = {"Cs": "a lone surrogate (no text)", "Co": "a private-use character", "Cn": "an unassigned code point",
                "Cf": "a format character"}.get(unicodedata.category(bad[0]), "control character")
        raise InvalidConversationId(f"conversation id contains {kind} {bad[0]!r}")
    if "..." in conversation_id:  # Dagster reserves "..." inside partition keys
        raise InvalidConversationId("conversation id contains '...'")
    return conversation_id


def file_stem(conversation_id: str) -> str:
    """A file name stem that stays inside its folder and is unique per id.

    Plain ids (letters, digits, ``_.-``, no ``..``) are used as they are so files stay readable.
    Anything else is encoded as ``<readable part>~<hash>``: ``~`` never occurs in a plain id, so the
    encoding cannot collide with one, and the hash keeps distinct ids distinct.
    """
    check_conversation_id(conversation_id)
    if _SAFE_STEM.match(conversation_id) and ".." not in conversation_id:
        return conversation_id
    readable = re.sub(r"[^A-Za-z0-9_-]+", "_", conversation_id).strip("_")[:40] or "id"
    return f"{readable}~{ids.stable_hash('conversation-id', conversation_id)}"
