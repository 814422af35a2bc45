"""Stable ids: hashes of content and position, so rebuilding the same input gives the same ids."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable


def stable_hash(*parts: object, length: int = 16) -> str:
    h = hashlib.sha256()
    for part in parts:
        data = str(part).encode("utf-8")
        # Length-prefix each part so ("ab", "c") and ("a", "bc") never collide.
        h.update(len(data).to_bytes(8, "big"))
        h.update(data)
    return h.hexdigest()[:length]


def passage_id(conversation_id: str, session_id: str, turn_index: int, speaker: str, text: str) -> str:
    return "p_" + stable_hash("passage", conversation_id, session_id, turn_index, speaker, text)


def fingerprint(values: Iterable[str]) -> str:
    """Order-independent fingerprint of a set of ids (used to tie snapshots to their passages)."""
    return stable_hash("set", *sorted(values), length=32)
