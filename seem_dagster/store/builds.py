"""Builds: each run writes its tables apart, and only a complete, consistent set is published.

A build (a Dagster run; its id is the run id) writes every table it materializes under
``<root>/_builds/<stem>/<build id>/`` beside ``_owner.json``, which names the process writing it.
Steps of the run read the run's own tables; tables the run does not make come from the published
memory. The run's last step publishes (``publish``): it checks that the tables it staged, with the
published ones it did not replace, form a whole memory whose every table was made from the others,
then swaps the conversation's manifest in one whole-file write and records the source it was built
from. Nothing a reader follows changes before that write, and everything after it is tidying:

- the previous build's files stay until the next publish, for readers that opened its manifest;
- older builds, and unpublished builds whose writer is gone (a failed or killed run), are removed;
- temp files left by killed writers of the conversation's cache and registry are removed.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from seem_dagster import faults
from seem_dagster.store import owner, sources
from seem_dagster.store.commits import commit_paths, commits_of
from seem_dagster.store.files import as_root, children, is_local, remove_stale_temps, remove_tree, sync, write_bytes_atomic
from seem_dagster.store.keys import file_stem
from seem_dagster.store.manifest import (
    FORMAT,
    WITH_COMMITS,
    LostRace,
    SnapshotError,
    manifest_path,
    manifest_version,
    publish_lock,
    read_manifest,
    resolve,
    write_manifest,
)
from seem_dagster.store.snapshot import (
    BUILDS,
    EXTENSION,
    InconsistentSnapshot,
    build_folder,
    check_consistent,
    legacy_path,
    read_footer,
    staged_path,
)

OWNER = "_owner.json"
BASE = "_base.json"  # the published build a build started from (``note_base``)
# An unpublished build whose writer cannot be asked (another host, no run record) is removed once it
# has not been written to for this long.
STALE_BUILD_S = 24 * 3600.0


class PublishError(SnapshotError):
    pass


# ---- writing a build ------------------------------------------------------------------------------

_claimed: set[tuple[str, str, str]] = set()


def claim(root, conversation_id: str, build_id: str, *, in_process: bool) -> None:
    """Say which process writes the build (once per process). ``in_process``: the whole run happens in
    this process, so the process being gone means the run is."""
    key = (str(as_root(root)), file_stem(conversation_id), build_id)
    if key in _claimed:
        return
    record = {"build_id": build_id, "conversation_id": conversation_id, "writer": owner.me(), "in_process": in_process,
              "claimed_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    write_bytes_atomic(build_folder(root, conversation_id, build_id) / OWNER, json.dumps(record).encode(), durable=False)
    _claimed.add(key)


def note_base(root, conversation_id: str, build_id: str) -> None:
    """Record which published build the build starts from, before it reads anything: its publish is
    refused if another build was published meanwhile (its tables would silently replace that one's)."""
    path = build_folder(root, conversation_id, build_id) / BASE
    if path.exists():
        return  # a step run again in the same run: the base is the first one's
    manifest = read_manifest(root, conversation_id)
    write_bytes_atomic(path, json.dumps({"base_build": _memory_of(manifest)}).encode(), durable=False)


def _memory_of(manifest: dict | None) -> str | None:
    """Which published memory a manifest names: its build, and its last append commit if any."""
    if manifest is None:
        return None
    appended = commits_of(manifest)
    return manifest["build_id"] + (f"+{appended[-1]['id']}" if appended else "")


def _base(root, conversation_id: str, builds: Iterable[str]) -> tuple[bool, str | None]:
    """(whether a base is recorded, the memory it names) along the chain of a re-executed run."""
    for build in builds:
        try:
            return True, json.loads((build_folder(root, conversation_id, build) / BASE).read_text())["base_build"]
        except FileNotFoundError:
            continue
    return False, None


def _since(current: dict | None, base: str | None) -> list[dict] | None:
    """The append commits ``current`` holds past ``base`` (a ``_memory_of``: a build, and its last
    commit then) when it is that build with commits added since; None when another build was published."""
    if current is None or base is None:
        return None
    build, _, commit = base.partition("+")
    if current["build_id"] != build:
        return None
    ids = [c["id"] for c in commits_of(current)]
    if commit and commit not in ids:
        return None
    return commits_of(current)[ids.index(commit) + 1 if commit else 0:]


def _check_rebase(root, conversation_id: str, build: str, current: dict, footers: dict[str, dict]) -> None:
    """A build published over the appends made while it ran keeps them (its memory then holds every
    turn they added: each commit replaces the rows it names, in order, as on the old base), but only
    when it was made as the old base was, stage for stage: commits made on a memory of other settings
    are not that memory's."""
    for asset, footer in footers.items():
        entry = current["tables"].get(asset)
        if entry is None:
            continue
        old = read_footer(resolve(root, entry["path"]))
        mine = {k: v for k, v in (footer.get("stage") or {}).items() if k != "source"}
        theirs = {k: v for k, v in (old.get("stage") or {}).items() if k != "source"}
        if mine != theirs:
            raise PublishError(f"conversation {conversation_id!r}: turns were appended while build {build[:8]} ran, and its "
                               f"{asset} was made with other settings than the memory they were appended to: nothing of it was "
                               "published, so no turn is lost; build the conversation again")


def staged_tables(root, conversation_id: str, builds: Iterable[str]) -> dict[str, tuple[str, str]]:
    """asset -> (build id, path relative to the root) of the tables ``builds`` wrote; the first build
    that wrote an asset wins (a re-executed run first, then the run it re-executes)."""
    out: dict[str, tuple[str, str]] = {}
    stem = file_stem(conversation_id)
    for build in builds:
        folder = build_folder(root, conversation_id, build)
        names = sorted(p.name for p in children(folder))
        for name in names:
            if name.endswith(EXTENSION) and not name.startswith("."):
                out.setdefault(name[: -len(EXTENSION)], (build, f"{BUILDS}/{stem}/{build}/{name}"))
    return out


def staged_table(root, conversation_id: str, builds: Iterable[str], asset: str):
    """The path of ``asset`` as the first of ``builds`` that wrote it, or None."""
    for build in builds:
        path = staged_path(root, conversation_id, build, asset)
        if path.exists():
            return path
    return None


# ---- publishing -----------------------------------------------------------------------------------

@dataclass
class Published:
    manifest: dict
    staged: list[str]
    carried: list[str]  # published tables this build did not replace and kept
    dropped: list[str]  # published tables made from tables this build replaced (query results), no longer published
    previous_build: str | None
    removed_builds: list[str] = field(default_factory=list)
    removed_files: int = 0


def _legacy_tables(root, conversation_id: str, assets: Iterable[str]) -> dict[str, dict]:
    """A store written before manifests: its tables, as a manifest would name them."""
    tables = {}
    for asset in assets:
        path = legacy_path(root, asset, conversation_id)
        if path.exists():
            tables[asset] = {"build_id": read_footer(path).get("build_id"), "path": f"{asset}/{path.name}", "legacy": True}
    return tables


def publish(
    root, conversation_id: str, builds: list[str], required: Iterable[str], *, optional: Iterable[str] = (),
    run_state: Callable[[str], bool | None] | None = None,
) -> Published:
    """Publish what ``builds[0]`` (and the runs it re-executes, ``builds[1:]``) staged for the
    conversation, keeping the published tables it did not replace.

    ``required``: the tables a memory must have; ``optional``: tables made from them (query results)
    that are dropped when made from replaced ones. ``run_state(build id)``: True while that run is
    in progress, False once finished, None when unknown. Raises PublishError, publishing nothing,
    when the result would not be a whole memory made of tables made from each other.
    """
    required, optional = list(required), list(optional)
    with publish_lock(root, conversation_id):
        version = manifest_version(root, conversation_id)
        current = read_manifest(root, conversation_id)
        recorded, base = _base(root, conversation_id, builds)
        now = _memory_of(current)
        later: list[dict] = []  # append commits published on the build's base while it ran: carried onto it
        if recorded and now != base and (later := _since(current, base)) is None:
            raise PublishError(f"conversation {conversation_id!r}: build {now[:8] if now else 'none'} was published while build "
                               f"{builds[0][:8]} ran (it started from {base[:8] if base else 'no memory'}): nothing of it was "
                               "published, so neither build is lost; build the conversation again")
        current_tables = current["tables"] if current else _legacy_tables(root, conversation_id, required + optional)
        staged = staged_tables(root, conversation_id, builds)
        if not staged:
            raise PublishError(f"conversation {conversation_id!r}: build {builds[0][:8]} wrote no table to publish")
        tables, footers = {}, {}
        for asset, (build, relative) in staged.items():
            footers[asset] = read_footer(resolve(root, relative))
            tables[asset] = {"build_id": build, "path": relative, "fingerprint": footers[asset].get("fingerprint"),
                             "rows": footers[asset].get("rows")}
        if later:
            _check_rebase(root, conversation_id, builds[0], current, footers)
        carried = []
        appended = {a for c in commits_of(current) for a in c["tables"]}
        for asset, entry in current_tables.items():
            if asset in tables:
                continue
            if asset in appended:
                raise PublishError(f"conversation {conversation_id!r}: build {builds[0][:8]} did not make {asset}, which appends "
                                   "changed since the last build; materialize every asset of the conversation (job build_memory)")
            try:
                footers[asset] = read_footer(resolve(root, entry["path"]))
            except FileNotFoundError:
                continue  # reported below if the memory needs it
            tables[asset] = {**{k: v for k, v in entry.items() if k != "legacy"}, "fingerprint": footers[asset].get("fingerprint"),
                             "rows": footers[asset].get("rows")}
            carried.append(asset)
        dropped = _drop_stale(tables, footers, [a for a in carried if a not in required])
        carried = [a for a in carried if a not in dropped]
        missing = [a for a in required if a not in tables]
        if missing:
            raise PublishError(
                f"conversation {conversation_id!r}: build {builds[0][:8]} would publish a memory without {', '.join(missing)}; "
                "materialize every asset of the conversation (job build_memory)"
            )
        try:
            check_consistent(conversation_id, footers)
        except InconsistentSnapshot as err:
            raise PublishError(f"nothing published: {err}") from None
        source = (footers.get("passages", {}).get("stage") or {}).get("source")
        rebased = {"format": WITH_COMMITS, "commits": later, "base_source": source, "source": current.get("source")} if later else {}
        manifest = {
            "format": FORMAT, "conversation_id": conversation_id, "build_id": builds[0],
            "published_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "tables": dict(sorted(tables.items())), "source": source, **rebased,
            # The files of the memory this one replaces: kept until the next publish.
            "previous": {"build_id": current.get("build_id") if current else "before manifests", "tables": current_tables,
                         "commits": commits_of(current)}
            if current_tables else None,
        }
        sync([resolve(root, relative) for _, relative in staged.values()])  # the tables are on disk before the manifest names them
        faults.point("publish.before_manifest")
        try:
            write_manifest(root, conversation_id, manifest, expect=version)
        except LostRace as err:
            raise PublishError(str(err)) from None
        faults.point("publish.after_manifest")
        if manifest["source"]:
            published = sources.Source.from_json(manifest["source"])
            sources.write_published(root, published)
            # The registration this build read is published; a newer one keeps waiting.
            sources.clear_pending(root, conversation_id, only_if=published)
        faults.point("publish.after_sources")
    result = Published(manifest, sorted(staged), sorted(carried), sorted(dropped),
                       manifest["previous"]["build_id"] if manifest["previous"] else None)
    # The builds the replaced manifest kept for its readers were complete: nobody writes them any more.
    before = (current or {}).get("previous") or {}
    retired = _referenced({"tables": before.get("tables") or {}, "commits": before.get("commits") or []})[0]
    result.removed_builds, result.removed_files = collect_garbage(root, conversation_id, run_state, retired)
    faults.point("publish.after_sweep")
    return result


def _drop_stale(tables: dict[str, dict], footers: dict[str, dict], candidates: list[str]) -> list[str]:
    """Of ``candidates``, those made from a table other than the one now in ``tables`` (or from one dropped)."""
    dropped: list[str] = []
    changed = True
    while changed:
        changed = False
        for asset in candidates:
            if asset in dropped:
                continue
            upstream = footers[asset].get("upstream", {})
            if any(u in dropped or (u in footers and footers[u].get("fingerprint") != fp) for u, fp in upstream.items()):
                dropped.append(asset)
                tables.pop(asset, None)
                footers.pop(asset, None)
                changed = True
    return dropped


def retire_previous(root, conversation_id: str) -> int:
    """Make the published memory the only one kept: the manifest no longer names the build it
    replaced, and every other build of the conversation (kept for readers of the previous manifest,
    unpublished, or still being written) is removed. What a forget ends with: a reader that opened
    the previous manifest reads the current one again (``snapshot.read_published``). Returns builds removed."""
    with publish_lock(root, conversation_id):
        manifest = read_manifest(root, conversation_id)
        if manifest is None:
            return 0
        if manifest.get("previous"):
            manifest = {**manifest, "previous": None}
            write_manifest(root, conversation_id, manifest)
        keep, _ = _referenced(manifest)
        base = as_root(root) / BUILDS / file_stem(conversation_id)
        candidates = sorted(p.name for p in children(base))
        removed = 0
        for build in candidates:
            if build not in keep:
                remove_tree(base / build)
                removed += 1
        return removed


def remove_conversation_builds(root, conversation_id: str) -> int:
    """Every build of the conversation, published or not (a whole conversation forgotten)."""
    base = as_root(root) / BUILDS / file_stem(conversation_id)
    count = len(children(base))
    if not count:
        return 0
    remove_tree(base)
    return count


# ---- tidying --------------------------------------------------------------------------------------

def _referenced(manifest: dict | None) -> tuple[set[str], set[str]]:
    """(build ids, relative paths) a manifest names, its previous build's included."""
    builds, paths = set(), set()
    if not manifest:
        return builds, paths
    named = [e["path"] for group in (manifest["tables"], (manifest.get("previous") or {}).get("tables") or {}) for e in group.values()]
    for path in named + commit_paths(manifest):
        paths.add(path)
        parts = path.split("/")
        if parts[0] == BUILDS and len(parts) == 4:
            builds.add(parts[2])
    return builds, paths


def _last_write(folder) -> float:
    """Seconds since anything in ``folder`` was written (0 when it cannot be told: keep it)."""
    try:
        if is_local(folder):
            times = [e.stat().st_mtime for e in os.scandir(folder.path)]
        else:
            times = []
            for info in folder.fs.ls(folder.path, detail=True):
                stamp = info.get("LastModified") or info.get("mtime") or info.get("created")
                if stamp is not None:
                    times.append(stamp.timestamp() if hasattr(stamp, "timestamp") else float(stamp))
    except (FileNotFoundError, OSError):
        return 0.0
    return time.time() - max(times) if times else STALE_BUILD_S + 1


def build_is_live(root, conversation_id: str, build_id: str, run_state: Callable[[str], bool | None] | None = None) -> bool:
    """Whether an unpublished build may still be written to (so must be left alone)."""
    folder = build_folder(root, conversation_id, build_id)
    idle = _last_write(folder)
    state = run_state(build_id) if run_state else None
    if state is not None:
        return state and idle < STALE_BUILD_S  # a run stuck "in progress" for a day was lost
    try:
        record = json.loads((folder / OWNER).read_text())
    except (FileNotFoundError, ValueError):
        record = {}
    if record.get("in_process"):
        running = owner.alive(record.get("writer") or {})
        if running is not None:
            return running
    return idle < STALE_BUILD_S


def collect_garbage(root, conversation_id: str, run_state: Callable[[str], bool | None] | None = None,
                    retired: set[str] = frozenset()) -> tuple[list[str], int]:
    """Remove the conversation's builds that no reader or writer needs (``retired``: builds once
    published, finished whatever their writer does now), the files of the layout before manifests once
    nothing names them, and temp files of killed writers. Returns (builds removed, files removed)."""
    manifest = read_manifest(root, conversation_id)
    keep, paths = _referenced(manifest)
    base = as_root(root) / BUILDS / file_stem(conversation_id)
    removed = []
    candidates = sorted(p.name for p in children(base))
    for build in candidates:
        if build in keep or (build not in retired and build_is_live(root, conversation_id, build, run_state)):
            continue
        remove_tree(base / build)
        removed.append(build)
    files = 0
    previous = (manifest or {}).get("previous") or {}
    # The older layout's files are named by asset: those of the assets the manifests know.
    assets = set((manifest or {}).get("tables", {})) | set(previous.get("tables") or {})
    for asset in assets:
        path = legacy_path(root, asset, conversation_id)
        if f"{asset}/{path.name}" not in paths and path.exists():
            path.unlink()
            files += 1
    if is_local(as_root(root)):
        files += len(sweep_temps(root, conversation_id, assets))
    return removed, files


def sweep_temps(root, conversation_id: str, assets: Iterable[str] = ()) -> list[Path]:
    """Temp files of killed writers of the conversation's files outside builds (cache, registry, manifest)."""
    base = Path(as_root(root).path)
    stem = file_stem(conversation_id)
    targets = [Path(manifest_path(root, conversation_id).path), Path(sources.source_path(root, conversation_id).path),
               Path(sources.pending_path(root, conversation_id).path)]
    targets += [Path(legacy_path(root, a, conversation_id).path) for a in assets]
    targets += [folder / f"{stem}{EXTENSION}" for folder in base.glob("_cache/*/*") if folder.is_dir()]
    return [p for target in targets for p in remove_stale_temps(target)]
