"""`Memory`'s writes: turns added from Python, input files, and forgetting; each built through Dagster.

Every write ends in the same place: a registered source and a run of the ``build_memory`` job for
the conversation (``defs.runner``), so what `Memory.add` stores is built, checked and published like
a file dropped in the inbox. The Dagster instance is the one ``DAGSTER_HOME`` names (runs show in
the UI, and a forget deletes the conversation's runs from it), else an in-memory one per build.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import replace
from pathlib import Path

from seem_dagster.forgetting import sweep, tombstones
from seem_dagster.forgetting.selection import ForgetError, select, selection
from seem_dagster.ingest import InputError, jsonl
from seem_dagster.ingest.dates import parse_iso
from seem_dagster.ingest.load import clear_parsed
from seem_dagster.memory.errors import BuildFailed, InvalidRequest, UnknownConversation
from seem_dagster.memory.records import Added, Forgotten
from seem_dagster.memory.turns import to_lines
from seem_dagster.registry import EMPTY, FORGOTTEN, Registered, absolute, register_file, why_rebuild
from seem_dagster.schemas import Passages
from seem_dagster.store import builds, input_log
from seem_dagster.store.manifest import published_rows
from seem_dagster.store.snapshot import SnapshotError, read_snapshot
from seem_dagster.store.sources import pending_path, published_source, source_to_build

# Tables whose rows say which cache entries the memory asks for (pipeline.live).
LIVE_TABLES = ["passages", "facts", "event_frames", "entities", "llm_calls"]


class BuildsFailed(BuildFailed):
    """Some conversations of an input file failed to build; ``results`` holds every conversation's outcome."""

    def __init__(self, message: str, results: list[Added], log_path: str | None = None):
        super().__init__(message, log_path)
        self.results = results


class Writer:
    def __init__(self, memory):
        self.memory = memory
        self._lock = threading.RLock()  # one write at a time per Memory: a build has the cores anyway
        self._defs = None
        self._instance = None

    @property
    def store(self) -> str:
        return self.memory.store

    @property
    def config(self):
        return self.memory.config

    # ---- building -------------------------------------------------------------------------------

    def instance(self):
        """DAGSTER_HOME's instance, or None: each build then runs on an in-memory one, dropped after it."""
        if self._instance is None and os.environ.get("DAGSTER_HOME"):
            from dagster import DagsterInstance

            self._instance = DagsterInstance.get()
        return self._instance

    def _build(self, todo: list[Registered], source: str, progress: bool = False) -> dict:
        from seem_dagster.defs.run_events import default_log_dir
        from seem_dagster.defs.runner import build_conversations

        if not todo:
            return {}
        if self._defs is None:
            from seem_dagster.defs.assemble import build_defs

            self._defs = build_defs(self.memory.resolved)
        ids = [r.conversation_id for r in todo]
        outcomes = build_conversations(self._defs, ids, instance=self.instance(), progress=progress, config=self.memory.resolved,
                                       log_dir=default_log_dir(self.store), tags={cid: {"seem/source": source} for cid in ids})
        return {o.conversation_id: o for o in outcomes}

    def _added(self, reg: Registered, outcome, started: float, before: int | None, status: str | None = None) -> Added:
        """``before``: turns the published memory held before this build (None: no memory yet)."""
        built = outcome is not None and outcome.success
        extracted = int(((outcome.materialized or {}).get("event_frames") or {}).get("extracted", 0)) if built else 0
        return Added(reg.conversation_id, status or reg.status, reg.passages - (before or 0) if built else 0, reg.passages,
                     outcome.run_id if built else None, time.perf_counter() - started, extracted, reg.forgotten, reg.excluded,
                     tuple(reg.skipped), dict(outcome.step_seconds or {}) if built else {})

    @staticmethod
    def _failed(cid: str, outcome) -> str:
        return f"the build of {cid} failed: {outcome.error} (nothing of it was published; the run's log: {outcome.log_path})"

    # ---- add ------------------------------------------------------------------------------------

    def add(self, cid: str, turns, session_id: str | None) -> Added:
        started = time.perf_counter()
        options = self.config.ingest
        lines = to_lines(cid, turns, session_id, options)  # raises before anything is written
        log_source = input_log.source_path(self.store, cid)
        with self._lock, input_log.writing(self.store, cid):
            other = _registered_elsewhere(self.store, cid, log_source)
            if other is not None:
                raise InvalidRequest(f"conversation {cid!r} is built from {other}: add its turns to that file and build it "
                                     "(`seem build`, `Memory.add_file`), or add them under another conversation id")
            stones = tombstones.read(self.store, cid)
            kept = [line for line in lines if not _names_forgotten(line, stones)]
            dropped = len(lines) - len(kept)
            if not kept:  # every turn was forgotten before: the log never holds them again
                earlier = published_rows(self.store, cid) or 0
                return Added(cid, FORGOTTEN, 0, earlier, None, time.perf_counter() - started, forgotten=dropped)
            before = input_log.read(self.store, cid)
            text = before + "\n".join(_with_ids(before, kept)) + "\n"
            label = str(input_log.log_path(self.store, cid))
            try:
                jsonl.read(text, label, options)
            except InputError as err:  # a clash with an earlier turn (a reused id): name the new turn
                raise _as_turn_error(err, before, cid) from None
            earlier = published_rows(self.store, cid)
            input_log.write(self.store, cid, text)
            (reg,) = [r for r in register_file(self.store, log_source, "jsonl", options) if r.conversation_id == cid]
            if reg.status == "unchanged" and why_rebuild(self.store, cid, self.config) is None:
                return replace(self._added(reg, None, started, earlier, "current"), forgotten=dropped)
            outcome = self._build([reg], log_source)[cid]
        if not outcome.success:
            raise BuildFailed(self._failed(cid, outcome) + "; the turns are kept in the store's input log and the next build takes them",
                              outcome.log_path)
        return replace(self._added(reg, outcome, started, earlier), forgotten=dropped)

    # ---- add_file -------------------------------------------------------------------------------

    def add_file(self, path: str, fmt: str | None, questions: str | None, conversations: list[str] | None, rebuild: bool,
                 progress: bool = False) -> list[Added]:
        started = time.perf_counter()
        with self._lock:
            registered = register_file(self.store, path, fmt, self.config.ingest, questions=questions, conversations=conversations)
            current = set() if rebuild else {r.conversation_id for r in registered if r.status == "unchanged"
                                             and why_rebuild(self.store, r.conversation_id, self.config) is None}
            todo = [r for r in registered if r.status not in (EMPTY, FORGOTTEN) and r.conversation_id not in current]
            before = {r.conversation_id: published_rows(self.store, r.conversation_id) for r in todo}
            outcomes = self._build(todo, absolute(path), progress)
        results = []
        for reg in registered:
            outcome = outcomes.get(reg.conversation_id)
            added = self._added(reg, outcome, started, before.get(reg.conversation_id), "current" if reg.conversation_id in current else None)
            results.append(added if outcome is None or outcome.success else replace(added, status="failed"))
        failed = [(r, outcomes[r.conversation_id]) for r in results if r.status == "failed"]
        if failed:
            (first, outcome), n = failed[0], len(failed)
            raise BuildsFailed(f"{n} of {len(outcomes)} conversations failed; {first.conversation_id}: {outcome.error} "
                               f"(nothing of it was published; the run's log: {outcome.log_path})", results, outcome.log_path)
        return results

    # ---- forget ---------------------------------------------------------------------------------

    def forget(self, cid: str, turns, session_id, speaker, before) -> Forgotten:
        started = time.perf_counter()
        try:
            chosen = selection(turns, session_id, speaker, before)
        except ForgetError as err:
            raise InvalidRequest(str(err)) from None
        if published_source(self.store, cid) is None:  # before any lock file is made for it
            raise UnknownConversation(f"no memory of conversation {cid!r} in this store")
        with self._lock, input_log.writing(self.store, cid):
            try:
                passages = read_snapshot(self.store, cid, ["passages"])["passages"]
            except SnapshotError:
                if published_source(self.store, cid) is None:
                    raise UnknownConversation(f"no memory of conversation {cid!r} in this store") from None
                raise
            try:
                rows = select(passages, chosen, cid)
            except ForgetError as err:
                raise InvalidRequest(str(err)) from None
            whole = rows.height == passages.height
            texts = rows[Passages.text].to_list()
            tombstones.add(self.store, cid, rows)
            stones = tombstones.read(self.store, cid)
            removed = {"input_log_lines": input_log.rewrite(self.store, cid, lambda _, line: not _names_forgotten(line, stones))}
            warnings: list[str] = []
            if whole:
                removed |= sweep.drop_conversation(self.store, cid)
                build_id = None
            else:
                build_id = self._rebuild_without(cid, removed)
            clear_parsed()  # no parsed copy of the input stays in this process
            removed["logs"] = sweep.scrub_logs(_log_folders(self.store), cid, texts)
            removed["dagster_runs"], more = self._scrub_instance(cid, build_id, whole)
            warnings += more
            self.memory._drop_loaded(cid, sql_workers=True)
        refs = tuple(rows[Passages.source_ref].to_list())
        return Forgotten(cid, rows.height, refs, passages.height - rows.height, build_id, time.perf_counter() - started,
                         removed, tuple(warnings))

    def _rebuild_without(self, cid: str, removed: dict) -> str:
        from seem_dagster.pipeline.live import KEYED, live_keys
        from seem_dagster.store.cache import KEY

        # Tables made from all the turns at once go before the rebuild, which writes them again.
        removed["cache_tables"] = sweep.purge_whole_state(self.store, cid, KEYED)
        source = source_to_build(self.store, cid)
        try:
            registered = register_file(self.store, source.path, source.format, source.ingest, questions=source.questions_path,
                                       conversations=[cid])
        except InputError as err:
            raise BuildFailed(f"the forgotten turns are tombstoned, but {cid} cannot be rebuilt from its input ({err}); they leave "
                              "its memory at its next successful build") from None
        outcome = self._build([r for r in registered if r.conversation_id == cid], source.path).get(cid)
        if outcome is None or not outcome.success:
            raise BuildFailed(f"the forgotten turns are tombstoned, but {self._failed(cid, outcome) if outcome else 'nothing was built'}; "
                              "they leave its memory at its next successful build", outcome.log_path if outcome else None)
        removed["builds"] = builds.retire_previous(self.store, cid)
        tables = read_snapshot(self.store, cid, LIVE_TABLES)
        from seem_dagster.embeddings.cache import HASH

        pruned = sweep.prune_keyed(self.store, cid, live_keys(tables, self.config), {"extraction": KEY, "llm": KEY, "embeddings": HASH})
        removed["cache_rows"] = sum(pruned.values())
        return outcome.run_id

    def _scrub_instance(self, cid: str, build_id: str | None, whole: bool) -> tuple[int, list[str]]:
        instance = self.instance()
        if instance is None:
            return 0, []  # every build ran on an in-memory instance, gone with it
        from seem_dagster.defs.scrub import delete_runs

        return delete_runs(instance, cid, {build_id} if build_id else set(), whole=whole)


def _registered_elsewhere(root, cid: str, log_source: str) -> str | None:
    """The input file the conversation is registered from, when it is not the store's input log."""
    for source in (published_source(root, cid), _pending(root, cid)):
        if source is not None and source.path != log_source:
            return source.path
    return None


def _pending(root, cid: str):
    return source_to_build(root, cid) if pending_path(root, cid).exists() else None


def _with_ids(before: str, lines: list[str]) -> list[str]:
    """Each new line with an explicit ``id`` (its session and place in it, as the JSONL reader would
    name it now), so its input id stays the same when an earlier turn is forgotten."""
    counts: dict[str, int] = {}
    for line in before.splitlines():
        if line.strip():
            session = json.loads(line).get("session_id")
            counts[session] = counts.get(session, 0) + 1
    out = []
    for line in lines:
        obj = json.loads(line)
        session = obj["session_id"]
        if obj.get("id") is None:
            obj["id"] = f"{session}:{counts.get(session, 0)}"
        counts[session] = counts.get(session, 0) + 1
        out.append(json.dumps(obj, ensure_ascii=False))
    return out


def _as_turn_error(err: InputError, before: str, cid: str) -> InputError:
    earlier = len(before.splitlines())
    record = err.record or ""
    if record.startswith("line "):
        try:
            number = int(record.split()[1])
        except (IndexError, ValueError):
            number = 0
        if number > earlier:
            return InputError(f"add to {cid!r}", f"turn {number - earlier}", err.field, err.problem.replace("also line", "also log line"))
    return err


def _names_forgotten(line: str, stones: tombstones.Tombstones) -> bool:
    """Whether a line of the input log is a forgotten turn (matched by content, as the build matches it)."""
    if not line.strip() or stones.key is None:
        return False
    obj = json.loads(line)
    try:
        stamp = parse_iso(obj["timestamp"])
    except (KeyError, TypeError, ValueError):
        return False
    return tombstones.turn_hash(stones.key, obj.get("speaker"), stamp, obj.get("text")) in stones.hashes


def _log_folders(root: str) -> list[Path]:
    from seem_dagster.defs.run_events import default_log_dir

    return list(dict.fromkeys([default_log_dir(root), default_log_dir()]))
