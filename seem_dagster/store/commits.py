"""Append commits: small sets of rows published on top of a conversation's base build.

A build (a Dagster run) publishes whole tables: the base. An append (``Memory.add`` of turns that
extend the memory) publishes a commit instead: for each table, the rows it adds or replaces, keyed by
the table's id columns, and the keys it removes. The manifest names the base build and its whole list
of commits, so a reader sees one whole memory: the base with every commit applied in order (a row
replaced keeps its place, a new row comes after the others). A commit's files live in a folder of
their own under ``_builds/<stem>/``, like a build's, and go when no manifest names them any more.

Compaction folds the commits into a fresh base: a build of the conversation's input, which publishes
whole tables and a manifest without commits (``builds.publish``).
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Mapping
from datetime import datetime, timezone

import polars as pl

from seem_dagster import faults
from seem_dagster.store.files import sync
from seem_dagster.store.manifest import WITH_COMMITS, LostRace, SnapshotError, manifest_version, publish_lock, read_manifest, resolve, write_manifest
from seem_dagster.store.snapshot import BUILDS, EXTENSION, build_folder, check_build_id, content_fingerprint, write_table

# Each table's row identity: a commit's row replaces the row of the same key.
KEYS: dict[str, tuple[str, ...]] = {
    "passages": ("passage_id",),
    "questions": ("question_id",),
    "event_frames": ("frame_id",),
    "facts": ("fact_id",),
    "properties": ("property_id",),
    "llm_calls": ("key",),
    "episodes": ("episode_id",),
    "entities": ("entity_id",),
    "graph_edges": ("source", "target", "kind"),
    "retrieval_index": ("kind", "item_id"),
}
_ORDER = "__seem_order"


class CommitError(SnapshotError):
    pass


def commits_of(manifest: dict | None) -> list[dict]:
    return list((manifest or {}).get("commits") or [])


def changes(old: pl.DataFrame, new: pl.DataFrame, keys: tuple[str, ...]) -> tuple[pl.DataFrame, list[list]]:
    """What turns ``old`` into ``new``: the rows of ``new`` that ``old`` lacks or holds otherwise, and
    the keys of ``old`` that ``new`` has no row for."""
    if old.schema != new.schema:
        raise CommitError(f"a commit's rows have another schema than the published table's ({new.schema} against {old.schema})")
    theirs = old.select(*keys, pl.Series("__hash", old.hash_rows(seed=0)))
    mine = new.with_columns(pl.Series("__hash", new.hash_rows(seed=0)))
    changed = mine.join(theirs, on=[*keys, "__hash"], how="anti", nulls_equal=True).drop("__hash")
    gone = old.select(*keys).join(new.select(*keys), on=list(keys), how="anti", nulls_equal=True)
    return changed, [list(r) for r in gone.iter_rows()]


def apply(base: pl.DataFrame, rows: pl.DataFrame, deleted: list[list], keys: tuple[str, ...]) -> pl.DataFrame:
    """``base`` with a commit applied: a replaced row keeps its place, a new one is appended (in the
    commit's order), a deleted key's row goes."""
    if rows.height == 0 and not deleted:
        return base
    if not deleted and base.select(*keys).join(rows.select(*keys), on=list(keys), how="semi", nulls_equal=True).height == 0:
        return pl.concat([base, rows], how="vertical")  # only new rows (an index's vectors): no row of base moves
    ordered = base.with_row_index(_ORDER)
    placed = rows.join(ordered.select(*keys, _ORDER), on=list(keys), how="left", nulls_equal=True)
    fresh = placed[_ORDER].is_null()
    placed = placed.with_columns(
        pl.when(fresh).then(pl.lit(base.height, pl.UInt32) + fresh.cast(pl.UInt32).cum_sum()).otherwise(pl.col(_ORDER)).alias(_ORDER)
    ).select(ordered.columns)
    merged = pl.concat([ordered, placed], how="vertical").unique(subset=list(keys), keep="last", maintain_order=True)
    if deleted:
        gone = pl.DataFrame([list(col) for col in zip(*deleted)], schema={k: base.schema[k] for k in keys}, orient="col")
        merged = merged.join(gone, on=list(keys), how="anti", nulls_equal=True)
    return merged.sort(_ORDER).drop(_ORDER)


class Merging(Mapping):
    """A memory's tables with commits still to apply: each table is merged the first time it is read,
    so an add returns without merging and the next read of a table pays once. ``then`` gives the
    tables with one more commit; row counts are kept without merging (``heights``)."""

    def __init__(self, tables: Mapping[str, pl.DataFrame], pending: dict[str, list] | None = None,
                 heights: dict[str, int] | None = None):
        self._tables = dict(tables)
        self._pending = {a: list(p) for a, p in (pending or {}).items()}
        self._heights = dict(heights) if heights is not None else {a: f.height for a, f in self._tables.items()}
        self._lock = threading.Lock()

    def __getitem__(self, asset: str) -> pl.DataFrame:
        with self._lock:
            todo = self._pending.pop(asset, None)
            if todo:
                frame = self._tables[asset]
                for rows, deleted in todo:
                    frame = apply(frame, rows, deleted, KEYS[asset])
                self._tables[asset] = frame
            return self._tables[asset]

    def __iter__(self):
        return iter(self._tables)

    def __len__(self) -> int:
        return len(self._tables)

    def schema(self, asset: str) -> pl.Schema:
        return self._tables[asset].schema

    def heights(self) -> dict[str, int]:
        return dict(self._heights)

    def then(self, tables: dict[str, tuple[pl.DataFrame, list[list]]], added: dict[str, int]) -> Merging:
        """These tables with a commit's ``tables`` applied after the others; ``added``: the rows of each
        that no earlier row has the key of (the rest replace rows)."""
        pending = {a: list(p) for a, p in self._pending.items()}
        heights = dict(self._heights)
        for asset, (rows, deleted) in tables.items():
            if rows.height or deleted:
                pending.setdefault(asset, []).append((rows, deleted))
                heights[asset] += added.get(asset, 0) - len(deleted)
        return Merging(self._tables, pending, heights)


def read_commit_table(root, entry: dict) -> tuple[pl.DataFrame, list[list]]:
    from seem_dagster.store.snapshot import read_table_with_footer

    frame, footer = read_table_with_footer(resolve(root, entry["path"]))
    return frame, footer.get("deleted") or []


PREFIX = "commit-"  # a commit's folder under _builds/<stem>/ (a build's is its Dagster run id)


def new_id() -> str:
    return check_build_id(f"{PREFIX}{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(4)}")


def publish_commit(root, conversation_id: str, commit_id: str, base_build: str, base_commits: int,
                   tables: dict[str, tuple[pl.DataFrame, list[list]]], *, rows: dict[str, int], source: dict | None, turns: int) -> dict:
    """Publish one commit on top of the manifest as it was read (base ``base_build`` with
    ``base_commits`` commits): its tables written and synced first, then the manifest naming them, in
    one whole-file write. Refused, publishing nothing, when another writer published meanwhile.
    ``rows``: each table's row count once the commit is applied (what ``published_rows`` reports)."""
    folder = build_folder(root, conversation_id, commit_id)
    entries, paths = {}, []
    for asset, (frame, deleted) in sorted(tables.items()):
        if frame.height == 0 and not deleted:
            continue
        path = folder / (asset + EXTENSION)
        footer = {"asset": asset, "conversation_id": conversation_id, "build_id": commit_id, "base_build": base_build,
                  "commit": base_commits + 1, "fingerprint": content_fingerprint(frame.to_arrow()), "rows": frame.height,
                  "deleted": deleted, "written_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        write_table(path, frame, footer, durable=False)
        faults.point(faults.table_point(asset, "after"))
        entries[asset] = {"path": f"{BUILDS}/{folder.parent.name}/{commit_id}/{asset}{EXTENSION}", "rows": frame.height,
                          "deleted": len(deleted), "fingerprint": footer["fingerprint"]}
        paths.append(path)
    with publish_lock(root, conversation_id):
        version = manifest_version(root, conversation_id)
        current = read_manifest(root, conversation_id)
        if current is None or current["build_id"] != base_build or len(commits_of(current)) != base_commits:
            raise CommitError(f"conversation {conversation_id!r}: its memory was published again while this append was "
                              "being made; nothing of the append was published (its turns are in the input log)")
        commit = {"id": commit_id, "at": datetime.now(timezone.utc).isoformat(timespec="seconds"), "turns": turns,
                  "tables": entries, "rows": rows}
        manifest = {**current, "format": WITH_COMMITS, "commits": [*commits_of(current), commit], "source": source or current.get("source"),
                    "base_source": current.get("base_source", current.get("source"))}
        sync(paths)
        faults.point("append.before_manifest")
        try:
            write_manifest(root, conversation_id, manifest, expect=version)
        except LostRace as err:
            raise CommitError(str(err)) from None
        faults.point("append.after_manifest")
    return manifest


def merged_tables(root, manifest: dict, frames: dict[str, pl.DataFrame]) -> dict[str, pl.DataFrame]:
    """``frames`` (the base's tables) with every commit of ``manifest`` applied, in order."""
    out = dict(frames)
    for commit in commits_of(manifest):
        for asset, entry in commit["tables"].items():
            if asset in out:
                rows, deleted = read_commit_table(root, entry)
                out[asset] = apply(out[asset], rows, deleted, KEYS[asset])
    return out


def commit_paths(manifest: dict | None) -> list[str]:
    """Every file the commits of ``manifest`` (and of the memory it replaced, kept for its readers) name."""
    out = []
    for group in (manifest or {}, (manifest or {}).get("previous") or {}):
        for commit in commits_of(group):
            out += [entry["path"] for entry in commit["tables"].values()]
    return out

