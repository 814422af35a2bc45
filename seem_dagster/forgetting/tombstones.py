"""Tombstones: what keeps a forgotten turn out of every later build, holding no byte of its text.

``<root>/_tombstones/<conversation stem>.json`` lists each forgotten turn's passage id, the id its
input gave it (``source_ref``: a retried forget of it is told it is already forgotten, and no later
turn is given it again), a keyed hash of its speaker, time and text, and keyed hashes of its speaker
and session alone (a retried forget by speaker or session is told it is done). A conversation read for a build (``seem build``, the sensor,
the schedule, a backfill, ``Memory.add``) loses every turn that matches one of them, by passage id
(the same input read again) or by content (the same turn moved to another session or line of an
edited file), so a user's source file may keep the turn and it still never comes back. The hash is
keyed with a random key kept in the store (``_tombstones/_key``), so a list of hashes cannot be
checked against guessed sentences without the store itself.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from dataclasses import dataclass
from datetime import datetime, timezone

import polars as pl
from upath import UPath

from seem_dagster.ingest.conversation import Conversation
from seem_dagster.schemas import Passages
from seem_dagster.store.files import as_root, write_bytes_atomic
from seem_dagster.store.keys import file_stem
from seem_dagster.store.locks import exclusive

FOLDER = "_tombstones"
KEY_FILE = "_key"  # no conversation's stem starts with "_"
FORMAT = 1


@dataclass(frozen=True)
class Tombstones:
    passage_ids: frozenset[str] = frozenset()
    hashes: frozenset[str] = frozenset()
    key: bytes | None = None
    refs: frozenset[str] = frozenset()  # the input's ids of the forgotten turns (kept since tombstones had them)
    named: frozenset[str] = frozenset()  # keyed hashes of their speakers and sessions (``named_hash``): a retry by them is told

    def names(self, kind: str, value: str) -> bool:
        """Whether a forgotten turn had this speaker or session (``kind``), by its keyed hash."""
        return self.key is not None and named_hash(self.key, kind, value) in self.named

    def __bool__(self) -> bool:
        return bool(self.passage_ids or self.hashes)

    def forgotten(self, passages: pl.DataFrame) -> pl.Series:
        """Per passage row, whether a tombstone names it."""
        if not self:
            return pl.Series([False] * passages.height, dtype=pl.Boolean)
        rows = passages.select(Passages.passage_id, Passages.speaker, Passages.timestamp, Passages.text).iter_rows()
        return pl.Series([pid in self.passage_ids or (self.key is not None and turn_hash(self.key, s, t, x) in self.hashes)
                          for pid, s, t, x in rows], dtype=pl.Boolean)


def path(root, conversation_id: str) -> UPath:
    return as_root(root) / FOLDER / f"{file_stem(conversation_id)}.json"


def named_hash(key: bytes, kind: str, value: str) -> str:
    """A keyed hash of a forgotten turn's speaker or session: a retried forget by it can be told it is
    done, and no list of names can be read from the file."""
    return hashlib.blake2b(json.dumps([kind, value], ensure_ascii=False).encode("utf-8"), key=key, digest_size=16).hexdigest()


def turn_hash(key: bytes, speaker: str, timestamp: datetime, text: str) -> str:
    body = json.dumps([speaker, timestamp.isoformat(), text], ensure_ascii=False).encode("utf-8")
    return hashlib.blake2b(body, key=key, digest_size=16).hexdigest()


def _key(root, create: bool) -> bytes | None:
    location = as_root(root) / FOLDER / KEY_FILE
    try:
        return bytes.fromhex(location.read_text().strip())
    except FileNotFoundError:
        if not create:
            return None
    with exclusive(as_root(root) / FOLDER, KEY_FILE):
        try:
            return bytes.fromhex(location.read_text().strip())
        except FileNotFoundError:
            key = secrets.token_bytes(32)
            write_bytes_atomic(location, key.hex().encode())
            return key


def _entries(root, conversation_id: str) -> list[dict]:
    try:
        data = json.loads(path(root, conversation_id).read_text())
    except FileNotFoundError:
        return []
    return list(data.get("turns", []))


def read(root, conversation_id: str) -> Tombstones:
    entries = _entries(root, conversation_id)
    if not entries:
        return Tombstones()
    return Tombstones(frozenset(e["passage_id"] for e in entries), frozenset(e["hash"] for e in entries), _key(root, create=False),
                      frozenset(e["source_ref"] for e in entries if e.get("source_ref") is not None),
                      frozenset(h for e in entries for h in (e.get("speaker_hash"), e.get("session_hash")) if h is not None))


def add(root, conversation_id: str, passages: pl.DataFrame) -> int:
    """Tombstones for every row of ``passages``; returns how many are new."""
    key = _key(root, create=True)
    with exclusive(as_root(root) / FOLDER, file_stem(conversation_id)):
        entries = _entries(root, conversation_id)
        known = {e["passage_id"] for e in entries}
        stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
        columns = (Passages.passage_id, Passages.source_ref, Passages.speaker, Passages.timestamp, Passages.text, Passages.session_id)
        new = [{"passage_id": pid, "source_ref": ref, "hash": turn_hash(key, s, t, x), "speaker_hash": named_hash(key, "speaker", s),
                "session_hash": named_hash(key, "session", session), "forgotten_at": stamp}
               for pid, ref, s, t, x, session in passages.select(*columns).iter_rows() if pid not in known]
        if new:
            body = {"format": FORMAT, "conversation_id": conversation_id, "turns": entries + new}
            write_bytes_atomic(path(root, conversation_id), json.dumps(body, indent=1).encode())
    return len(new)


def drop_forgotten(root, conversation: Conversation) -> int:
    """Take the tombstoned turns out of a conversation just read from its input; returns how many."""
    stones = read(root, conversation.conversation_id)
    if not stones or conversation.passages.is_empty():
        return 0
    mask = stones.forgotten(conversation.passages)
    dropped = int(mask.sum())
    if dropped:
        conversation.passages = conversation.passages.filter(~mask)
    return dropped
