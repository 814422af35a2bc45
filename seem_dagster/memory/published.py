"""Reads that follow every publish: each conversation's memory is loaded once per published build.

A read first looks at the conversation's manifest (one small file) and reuses what it loaded when
the manifest names the same tables; otherwise it loads the tables the new manifest names (a
consistent snapshot, ``store.snapshot.read_published``) and keeps them. A long-lived reader (an
agent's `Memory`, the MCP server) therefore answers from each new publish at its next call, and each
call from one whole memory, never a mix of two builds. Loading one conversation happens once even
when several threads ask at the same time.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field

from seem_dagster.forgetting import journal
from seem_dagster.retrieval.index import MemoryIndex
from seem_dagster.retrieval.load import TABLES, index_of
from seem_dagster.store.commits import commits_of, merged_tables
from seem_dagster.store.manifest import SnapshotError, read_manifest
from seem_dagster.store.snapshot import legacy_path, read_footers, read_published
from seem_dagster.store.sources import registered_conversations


def memory_key(root, conversation_id: str) -> str | None:
    """What identifies the conversation's published memory now (None: none is published). Cheap: the
    manifest alone (a store written before manifests: its tables' footers)."""
    manifest = read_manifest(root, conversation_id)
    if manifest is not None:
        return manifest_key(manifest)
    if not legacy_path(root, "passages", conversation_id).exists():
        return None
    return _digest({a: f.get("fingerprint") for a, f in read_footers(root, conversation_id, TABLES).items()})


def manifest_key(manifest: dict) -> str:
    """The base build's tables and the commits on it."""
    return _digest([manifest["tables"], [c["id"] for c in manifest.get("commits") or []]])


def _digest(value) -> str:
    return hashlib.blake2b(json.dumps(value, sort_keys=True, default=str).encode(), digest_size=16).hexdigest()


@dataclass
class Loaded:
    key: str
    built: MemoryIndex | None  # None: made from ``tables`` at the first read that asks for it (``index``)
    build_id: str
    tables: dict | None = None  # the tables the index was made from (TABLES), to apply later commits to
    commits: tuple[str, ...] = ()  # the append commits applied
    _making: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def index(self) -> MemoryIndex:
        """The memory's index; a writer's install leaves it to the first read (an add returns without making it)."""
        if self.built is None:
            with self._making:
                if self.built is None:
                    self.built = index_of(self.tables)
        return self.built


class Published:
    def __init__(self, root, finish_forgets=None):
        """``finish_forgets(conversations)``: called before a conversation with an unfinished forget
        (a crash stopped it) is read, so nothing it removes is read again."""
        self.root = root
        self._finish_forgets = finish_forgets
        self._indexes: dict[str, Loaded] = {}
        self._locks: dict[object, threading.Lock] = {}
        self._guard = threading.Lock()

    def _lock(self, key) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(key, threading.Lock())

    def index(self, conversation_id: str) -> Loaded | None:
        """The conversation's memory as published now, or None when it has none."""
        self._unfinished([conversation_id])
        key = memory_key(self.root, conversation_id)
        if key is None:
            self._indexes.pop(conversation_id, None)
            return None
        held = self._indexes.get(conversation_id)
        if held is not None and held.key == key:
            return held
        with self._lock(conversation_id):
            held = self._indexes.get(conversation_id)
            if held is not None and held.key == key:
                return held
            later = self._appended(conversation_id, held)
            if later is not None:
                self._indexes[conversation_id] = later
                return later
            tables, manifest = read_published(self.root, conversation_id, TABLES)
            loaded_key = manifest_key(manifest) if manifest is not None else key
            held = Loaded(loaded_key, index_of(tables), manifest["build_id"] if manifest is not None else "before manifests", tables,
                          tuple(c["id"] for c in commits_of(manifest)))
            self._indexes[conversation_id] = held
            return held

    def _appended(self, conversation_id: str, held: Loaded | None) -> Loaded | None:
        """``held`` with the commits published on its base since it was loaded applied (only their
        files are read), or None when the memory was built again (then it is read whole)."""
        manifest = read_manifest(self.root, conversation_id)
        if held is None or held.tables is None or manifest is None or manifest["build_id"] != held.build_id:
            return None
        ids = [c["id"] for c in commits_of(manifest)]
        if tuple(ids[:len(held.commits)]) != held.commits:
            return None
        try:
            tables = merged_tables(self.root, {"commits": commits_of(manifest)[len(held.commits):]}, held.tables)
        except (SnapshotError, FileNotFoundError):
            return None  # replaced meanwhile: read whole
        return Loaded(manifest_key(manifest), None, held.build_id, tables, tuple(ids))

    def install(self, conversation_id: str, manifest: dict, tables: dict) -> None:
        """What a writer of this process just published (``manifest``) and the tables it holds, so the
        next read needs no file: an append's own turns are searchable at once."""
        with self._lock(conversation_id):  # (``tables`` may merge its last commits when the index is made: commits.Merging)
            self._indexes[conversation_id] = Loaded(manifest_key(manifest), None, manifest["build_id"], tables,
                                                    tuple(c["id"] for c in commits_of(manifest)))

    def sql_scope(self, conversations) -> tuple:
        """What identifies the SQL views of ``conversations`` (one id, a list, or None for every
        conversation with a memory) as published now: each conversation with its memory's key."""
        scope = [conversations] if isinstance(conversations, str) else list(conversations) if conversations is not None \
            else registered_conversations(self.root)
        self._unfinished(scope)
        return tuple((c, memory_key(self.root, c)) for c in scope)

    def _unfinished(self, conversations: list[str]) -> None:
        if self._finish_forgets is not None and any(journal.is_pending(self.root, c) for c in conversations):
            self._finish_forgets([c for c in conversations if journal.is_pending(self.root, c)])

    def forget(self, conversation_id: str) -> None:
        """Drop what was loaded of the conversation (its memory changed or went; SQL views follow the
        memory's key, so none of its old views is used again)."""
        self._indexes.pop(conversation_id, None)

    def close(self) -> None:
        self._indexes.clear()
