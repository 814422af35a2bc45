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


_MODULUS = 1 << 128


def multiset_fingerprint(values: Iterable[str], start: str | None = None) -> str:
    """Order-independent fingerprint of a multiset of strings that can be extended: the sum, modulo
    2^128, of each value's 128-bit hash, so the fingerprint of more values is ``start`` (the earlier
    values' fingerprint) plus theirs, whatever their number. A change-detector, not a signature."""
    total = int(start, 16) if start else 0
    for value in values:
        total += int.from_bytes(hashlib.blake2b(value.encode("utf-8"), digest_size=16).digest(), "big")
    return f"{total % _MODULUS:032x}"
