"""The sweep after a forget: what is left of the forgotten turns under the store goes.

The rebuild publishes a memory without them; what remains is what the store keeps beside the
published memory: the caches, the builds before this one, and the logs of failed runs. Each
function here removes one of those and says how much it removed.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from seem_dagster.store import input_log, sources
from seem_dagster.store.builds import remove_conversation_builds
from seem_dagster.store.cache import ConversationCache
from seem_dagster.store.files import as_root, is_local
from seem_dagster.store.keys import file_stem
from seem_dagster.store.manifest import manifest_path

# The first line of a failed run's log (defs.run_events.write_run_log) names its conversation.
LOG_HEADER = "# conversation "
MIN_TEXT_CHARS = 16  # shorter turns ("Sure!") occur in any log; a log is matched by its header then


def purge_whole_state(root, conversation_id: str, keyed: Iterable[str]) -> int:
    """Remove every cache of the conversation that is not ``keyed`` (whole tables made from all its
    turns: saved fusion, synonyms, properties, the judge's and the query-time model's replies): the
    rebuild writes them again from the turns that stay. Returns how many tables went."""
    cache = ConversationCache(root, conversation_id)
    keyed = set(keyed)
    return sum(cache.remove(kind, name) for kind, name in cache.entries() if kind not in keyed)


def prune_keyed(root, conversation_id: str, live: dict[str, set[str] | dict[str, set[str]]], key_columns: dict[str, str]) -> dict[str, int]:
    """Keep only the live entries of the keyed caches (``pipeline.live.live_keys``); a cache whose
    live keys are given per name (extraction: per extractor and version) loses every name it does
    not list. Returns rows removed per kind."""
    cache = ConversationCache(root, conversation_id)
    removed: dict[str, int] = {}
    for kind, name in cache.entries():
        if kind not in live:
            continue
        keep = live[kind]
        if isinstance(keep, dict):
            wanted = {cache.path(kind, n).parent.name: keys for n, keys in keep.items()}
            if name not in wanted:
                frame = cache.table(kind, name)
                removed[kind] = removed.get(kind, 0) + (frame.height if frame is not None else 0)
                cache.remove(kind, name)
                continue
            keep = wanted[name]
        removed[kind] = removed.get(kind, 0) + cache.prune(kind, name, key_columns[kind], keep)
    return removed


def remove_caches(root, conversation_id: str) -> int:
    cache = ConversationCache(root, conversation_id)
    return sum(cache.remove(kind, name) for kind, name in cache.entries())


def scrub_logs(folders: Iterable[Path], conversation_id: str, texts: Iterable[str]) -> int:
    """Delete the failed-run logs of the conversation (their first line names it), and any other log
    that holds one of ``texts`` (a turn of some length quoted in an error). Local folders only."""
    needles = [t for t in texts if len(t) >= MIN_TEXT_CHARS]
    header = f"{LOG_HEADER}{conversation_id}\n"
    removed = 0
    for folder in folders:
        if not folder.is_dir():
            continue
        for path in folder.glob("*.log"):
            try:
                text = path.read_text(errors="replace")
            except OSError:
                continue
            if text.startswith(header) or any(n in text for n in needles):
                path.unlink(missing_ok=True)
                removed += 1
    return removed


def drop_conversation(root, conversation_id: str) -> dict[str, int]:
    """Everything the store holds of a conversation but its tombstones: the published memory, every
    build, every cache, its registrations, its input log and its evaluation record."""
    removed = {"builds": remove_conversation_builds(root, conversation_id), "cache_tables": remove_caches(root, conversation_id)}
    stem = file_stem(conversation_id)
    paths = [manifest_path(root, conversation_id), sources.source_path(root, conversation_id),
             sources.pending_path(root, conversation_id), as_root(root) / "_eval" / f"{stem}.json"]
    removed["files"] = 0
    for path in paths:
        if path.exists():
            path.unlink()
            removed["files"] += 1
    removed["files"] += int(input_log.remove(root, conversation_id))
    if is_local(as_root(root)):
        for folder in ("_manifests", "_sources", "_sources/_pending", input_log.FOLDER):
            for temp in Path(as_root(root).path, folder).glob(f".tmp-{stem}.*"):
                temp.unlink(missing_ok=True)
    legacy = [as_root(root) / p.name / f"{stem}.parquet" for p in as_root(root).iterdir()
              if p.is_dir() and not p.name.startswith("_")] if as_root(root).exists() else []
    for path in legacy:  # a store written before manifests
        if path.exists():
            path.unlink()
            removed["files"] += 1
    return removed
