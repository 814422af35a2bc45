"""`Memory`'s writes: turns added from Python, input files, and forgetting; each built through Dagster.

Every write ends in the same place: a registered source and a run of the ``build_memory`` job for
the conversation (``defs.runner``), so what `Memory.add` stores is built, checked and published like
a file dropped in the inbox. The Dagster instance is the one ``DAGSTER_HOME`` names (runs show in
the UI, and a forget deletes the conversation's runs from it), else an in-memory one per build.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from dataclasses import replace
from pathlib import Path

import polars as pl

from seem_dagster import faults
from seem_dagster.forgetting import journal, sweep, tombstones
from seem_dagster.forgetting.selection import ForgetError, select, selection
from seem_dagster.ingest import InputError, jsonl
from seem_dagster.ingest.dates import parse_iso
from seem_dagster.ingest.load import clear_parsed, file_version, parse_to_write, written
from seem_dagster.memory import append
from seem_dagster.memory.errors import BuildFailed, InvalidRequest, UnknownConversation
from seem_dagster.memory.records import Added, Forgotten
from seem_dagster.memory.turns import to_lines
from seem_dagster.registry import EMPTY, FORGOTTEN, Registered, absolute, register_file, why_rebuild
from seem_dagster.schemas import Passages
from seem_dagster.store import builds, commits, input_log, locks, owner
from seem_dagster.store.files import as_root, children, is_local, jsonl_lines
from seem_dagster.store.keys import file_stem
from seem_dagster.store.manifest import published_rows, read_manifest
from seem_dagster.store.snapshot import SnapshotError, read_snapshot
from seem_dagster.store.sources import in_store, pending_path, published_source, source_to_build

# Tables whose rows say which cache entries the memory asks for (pipeline.live).
LIVE_TABLES = ["passages", "facts", "event_frames", "entities", "llm_calls"]


log = logging.getLogger(__name__)


class WriterBusy(BuildFailed):
    """Another writer of the conversation held it longer than ``store.writer_wait_s``: nothing was written."""


class BuildsFailed(BuildFailed):
    """Some conversations of an input file failed to build; ``results`` holds every conversation's outcome."""

    def __init__(self, message: str, results: list[Added], log_path: str | None = None):
        super().__init__(message, log_path)
        self.results = results


class Writer:
    def __init__(self, memory):
        self.memory = memory
        self._lock = threading.RLock()  # one write at a time per Memory: a build has the cores anyway
        self._current: dict[str, append.increment.Live] = {}  # conversation -> the memory this writer's last append left
        self._logged: dict[str, tuple[tuple, bytes, _Log]] = {}  # conversation -> (version, content, lines) of the log it last wrote
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

    # ---- one writer of a conversation at a time ----------------------------------------------------

    @contextlib.contextmanager
    def _writing(self, cid: str, wait_s: float | None = None):
        """Held for the whole of a write of ``cid``: this `Memory`'s writes take turns, and so do
        writers in other processes of this host (``store.locks``); one that waits longer than
        ``store.writer_wait_s`` is refused with ``WriterBusy``, having done nothing."""
        wait_s = self.config.store.writer_wait_s if wait_s is None else wait_s
        with self._lock:
            try:
                with locks.conversation_writer(self.store, cid, wait_s=wait_s):
                    yield
            except locks.Busy as err:
                raise WriterBusy(f"{err} (waited {wait_s:g} s, store.writer_wait_s): nothing was written") from None

    # ---- add ------------------------------------------------------------------------------------

    def add(self, cid: str, turns, session_id: str | None) -> Added:
        started = time.perf_counter()
        options = self.config.ingest
        lines = to_lines(cid, turns, session_id, options)  # raises before anything is written
        log_file = input_log.source_path(self.store, cid)
        with self._writing(cid):
            self._finish_if_interrupted(cid)
            other = _registered_elsewhere(self.store, cid, log_file)
            if other is not None:
                raise InvalidRequest(f"conversation {cid!r} is built from {other}: add its turns to that file and build it "
                                     "(`seem build`, `Memory.add_file`), or add them under another conversation id")
            stones = tombstones.read(self.store, cid)
            before, logged = self._log(cid)
            fresh = _not_logged(logged, lines)  # a retried add: turns with ids already in the log are not added again
            kept = [line for line in fresh if not _names_forgotten(line, stones)]
            dropped = len(fresh) - len(kept)
            if not kept and len(fresh) == len(lines):  # every turn was forgotten before: the log never holds them again
                earlier = published_rows(self.store, cid) or 0
                return Added(cid, FORGOTTEN, 0, earlier, None, time.perf_counter() - started, forgotten=dropped)
            earlier = published_rows(self.store, cid)
            # Asked before the log changes: whether the memory is current, so these turns can be appended to it.
            not_appended = append.why_not(self.store, cid, self.config) if kept else "nothing new"
            if kept:
                added = _with_ids(logged, kept, stones)
                raw = before + ("\n".join(added) + "\n").encode("utf-8")  # bytes: the log's text is never decoded whole
                try:  # the parse is kept for the registration and the append below, which read the log as written
                    parsed = parse_to_write(log_file, raw, jsonl.FORMAT, options, extends=len(before))
                except InputError as err:  # a clash with an earlier turn (a reused id): name the new turn
                    raise _as_turn_error(err, before.decode("utf-8"), cid) from None
                faults.point("add.before_log_write")
                input_log.write(self.store, cid, raw)  # durable before anything is built: the turns cannot be lost now
                faults.point("add.after_log_write")
                written(log_file, parsed)
                self._hold_log(cid, raw, logged, added)
            (reg,) = [r for r in register_file(self.store, log_file, "jsonl", options) if r.conversation_id == cid]
            if reg.status == "unchanged" and why_rebuild(self.store, cid, self.config) is None:
                return replace(self._added(reg, None, started, earlier, "current"), forgotten=dropped)
            if not_appended is None and reg.status == "changed":
                held = self._current.pop(cid, None)  # advanced by the append: kept again only once it is published
                try:
                    done = append.append(self.store, cid, self.config, len(kept), held)
                except commits.CommitError as err:  # another writer published meanwhile: the build below takes the turns
                    log.info("the add to %s is built by the build job: %s", cid, err)
                else:
                    self._current[cid] = done.live
                    self.memory._published.install(cid, done.manifest, done.live.tables)
                    self._observe(cid, done)
                    return Added(cid, reg.status, done.passages - (earlier or 0), done.passages, None, time.perf_counter() - started,
                                 done.extracted, dropped, reg.excluded, tuple(reg.skipped), {"append": round(done.seconds, 3)},
                                 commit=done.commit_id, appended=done.how)
            outcome = self._build([reg], log_file)[cid]
        if not outcome.success:
            raise BuildFailed(self._failed(cid, outcome) + "; the turns are kept in the store's input log and the next build takes them",
                              outcome.log_path)
        return replace(self._added(reg, outcome, started, earlier), forgotten=dropped)

    def _log(self, cid: str) -> tuple[bytes, _Log]:
        """The input log's content and its lines: as this writer last wrote them when the file is still
        that version (a local store), else read."""
        held = self._logged.get(cid)
        version = file_version(input_log.source_path(self.store, cid))
        if held is not None and version is not None and held[0] == version:
            return held[1], held[2]
        raw, logged = input_log.read_bytes(self.store, cid), _Log()
        for line in jsonl_lines(raw.decode("utf-8")):
            if line.strip():
                logged.add(json.loads(line))
        return raw, logged

    def _hold_log(self, cid: str, raw: bytes, logged: _Log, added: list[str]) -> None:
        for line in added:
            logged.add(json.loads(line))
        version = file_version(input_log.source_path(self.store, cid))
        if version is None:
            self._logged.pop(cid, None)
        else:
            self._logged[cid] = (version, raw, logged)

    def _observe(self, cid: str, done) -> None:
        """An append in the Dagster UI: an observation of the conversation's ``passages`` partition
        (no run), with the commit and the rows it changed; counts only, never a turn's words."""
        instance = self.instance()
        if instance is None:
            return
        from dagster import AssetKey, AssetObservation, MetadataValue

        try:
            instance.report_runless_asset_event(AssetObservation(
                asset_key=AssetKey("passages"), partition=cid, description="turns appended by Memory.add (a commit, no run)",
                metadata={"commit": MetadataValue.text(done.commit_id), "turns_appended": MetadataValue.int(done.new_turns),
                          "passages": MetadataValue.int(done.passages), "extracted": MetadataValue.int(done.extracted),
                          "changed_rows": MetadataValue.json(done.changed_rows),
                          "how": MetadataValue.text(done.how), "seconds": MetadataValue.float(round(done.seconds, 3))}))
        except Exception as err:  # noqa: BLE001 - the commit is published; the UI's record of it is not worth failing the add
            log.warning("the append to %s was published, but the Dagster instance did not take its observation: %s", cid, err)

    # ---- add_file -------------------------------------------------------------------------------

    def add_file(self, path: str, fmt: str | None, questions: str | None, conversations: list[str] | None, rebuild: bool,
                 progress: bool = False) -> list[Added]:
        started = time.perf_counter()
        from seem_dagster.ingest import load_input

        # Which conversations the file holds, to hold each one's writer lock (in one order: no two
        # writers wait on each other) before anything is registered.
        wanted = sorted({c.conversation_id for c in load_input(path, fmt, self.config.ingest, questions=questions,
                                                                conversations=conversations, emptied=[])})
        with self._lock, contextlib.ExitStack() as held:
            for cid in wanted:
                held.enter_context(self._writing(cid))
                self._finish_if_interrupted(cid)
            for cid in wanted:  # a file's build replaces a conversation's input: never the turns `add` acknowledged
                if input_log.log_path(self.store, cid).exists() and absolute(path) != input_log.source_path(self.store, cid):
                    raise InputError(path, f"conversation {cid!r}", "conversation_id",
                                     "this store holds turns added to it with `add` (its input log); a file would replace "
                                     "them: give the file's conversation another id, or add these turns with `add`")
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
        if not _known(self.store, cid):  # before any lock file is made for it
            gone = _forgotten_before(self.store, cid, chosen)
            if gone is None:
                raise UnknownConversation(f"no memory of conversation {cid!r} in this store")
            return Forgotten(cid, 0, (), 0, None, time.perf_counter() - started, {}, (_already(gone),), gone)
        with self._writing(cid):
            published, incoming = _published_passages(self.store, cid), _input_passages(self.store, cid)
            if published is None and incoming is None and not journal.is_pending(self.store, cid):
                raise UnknownConversation(f"no memory of conversation {cid!r} in this store")
            known = _union(published, incoming)
            if known is None:  # nothing of it is left to name: what is left to do is the forget a crash stopped
                build_id, removed, warnings = self._finish(cid, [])
                return Forgotten(cid, 0, (), 0, build_id, time.perf_counter() - started, removed, tuple(warnings))
            stones = tombstones.read(self.store, cid)
            try:
                rows = select(known, chosen, cid, already=stones.refs | stones.passage_ids, forgotten_name=stones.names)
            except ForgetError as err:
                if not journal.is_pending(self.store, cid):
                    raise InvalidRequest(str(err)) from None
                rows = known.clear()  # nothing more matches: what is left to do is the forget a crash stopped
            again = tuple(t for t in chosen.turns if t in stones.refs or t in stones.passage_ids)
            whole = rows.height > 0 and (chosen.whole or rows.height == known.height)
            if rows.height:
                journal.begin(self.store, cid, whole)  # first: from here a crash leaves the forget to finish
                faults.point("forget.after_journal")
                tombstones.add(self.store, cid, rows)
                faults.point("forget.after_tombstones")
            elif not journal.is_pending(self.store, cid):  # nothing it names is left (a retry, a policy run again): no change
                said = _already(again) if again else f"nothing to forget: no turn left matches {chosen.describe()}"
                return Forgotten(cid, 0, (), published_rows(self.store, cid) or 0, _published_build(self.store, cid),
                                 time.perf_counter() - started, {}, (said,), again)
            build_id, removed, warnings = self._finish(cid, rows[Passages.text].to_list())
        if again:
            warnings = [_already(again), *warnings]
        left = 0 if build_id is None else (published_rows(self.store, cid) or 0)
        return Forgotten(cid, rows.height, tuple(rows[Passages.source_ref].to_list()), left, build_id, time.perf_counter() - started,
                         removed, tuple(warnings), again)

    def _finish(self, cid: str, texts: list[str]) -> tuple[str | None, dict, list[str]]:
        """Every step of a forget after its tombstones, each one safe to run again: what a forget does,
        and what finishes one a crash stopped. Returns (the build published without the forgotten
        turns, or None when nothing of the conversation is left; what was removed; warnings)."""
        root = self.store
        if (journal.read(root, cid) or {}).get("whole"):  # a crash between the journal and the tombstones left some out
            known = _union(_published_passages(root, cid), _input_passages(root, cid))
            if known is not None and known.height:
                tombstones.add(root, cid, known)
        stones = tombstones.read(root, cid)
        texts = list(dict.fromkeys([*texts, *_stored_texts(root, cid, stones)]))
        removed = {"logs": sweep.scrub_logs(_log_folders(root), cid, texts)}
        faults.point("forget.after_logs")
        removed["input_log_lines"] = input_log.rewrite(root, cid, lambda _, line: not _names_forgotten(line, stones))
        faults.point("forget.after_input_log_rewrite")
        whole = bool((journal.read(root, cid) or {}).get("whole")) or _nothing_left(root, cid)
        if whole:
            removed |= sweep.drop_conversation(root, cid)
            build_id = None
        else:
            build_id = self._rebuild_without(cid, stones, removed)
        clear_parsed()  # no parsed copy of the input stays in this process
        removed["logs"] += sweep.scrub_logs(_log_folders(root), cid, texts)  # a failed rebuild's, if any
        faults.point("forget.before_dagster_scrub")
        removed["dagster_runs"], warnings = self._scrub_instance(cid, build_id, whole)
        faults.point("forget.after_dagster_scrub")
        journal.end(root, cid)
        self._current.pop(cid, None)  # no table of this process holds a forgotten turn
        self._logged.pop(cid, None)
        self.memory._drop_loaded(cid, sql_workers=True)
        return build_id, removed, warnings

    def _rebuild_without(self, cid: str, stones: tombstones.Tombstones, removed: dict) -> str | None:
        """A memory without the tombstoned turns (rebuilt only when the published one holds any), then
        every other build and every cache entry it does not ask for removed."""
        from seem_dagster.embeddings.cache import HASH
        from seem_dagster.pipeline.live import KEYED, live_keys
        from seem_dagster.store.cache import KEY

        published = _published_passages(self.store, cid)
        # Tables made from all the turns at once go, whether or not the published memory holds a forgotten
        # turn: a build killed after writing them holds turns only the input log had (the next build, or
        # the rebuild here, writes them again from the turns that stay).
        removed["cache_tables"] = sweep.purge_whole_state(self.store, cid, KEYED)
        faults.point("forget.after_cache_purge")
        if published is not None and bool(stones.forgotten(published).any()):
            source = source_to_build(self.store, cid)
            try:
                registered = register_file(self.store, source.location(self.store), source.format, source.ingest,
                                           questions=source.questions_location(self.store), conversations=[cid])
            except (InputError, OSError) as err:
                raise BuildFailed(f"the forgotten turns are tombstoned, but {cid} cannot be rebuilt from its input ({err}); "
                                  "the forget finishes at the next command of this store once its input can be read") from None
            outcome = self._build([r for r in registered if r.conversation_id == cid], source.location(self.store)).get(cid)
            if outcome is None or not outcome.success:
                raise BuildFailed(f"the forgotten turns are tombstoned, but {self._failed(cid, outcome) if outcome else 'nothing was built'}; "
                                  "the forget finishes at the next command of this store", outcome.log_path if outcome else None)
        faults.point("forget.after_rebuild")
        if read_manifest(self.store, cid) is None:  # turns only in the input log, never published: nothing of them is kept
            removed["builds"] = builds.remove_conversation_builds(self.store, cid)
            removed["cache_tables"] = removed.get("cache_tables", 0) + sweep.remove_caches(self.store, cid)
            faults.point("forget.after_retire")
            faults.point("forget.after_cache_prune")
            return None
        removed["builds"] = builds.retire_previous(self.store, cid)
        faults.point("forget.after_retire")
        tables = read_snapshot(self.store, cid, LIVE_TABLES)
        pruned = sweep.prune_keyed(self.store, cid, live_keys(tables, self.config), {"extraction": KEY, "llm": KEY, "embeddings": HASH})
        removed["cache_rows"] = sum(pruned.values())
        faults.point("forget.after_cache_prune")
        return _published_build(self.store, cid)

    def _finish_if_interrupted(self, cid: str) -> bool:
        """Finish a forget of ``cid`` that a crash stopped (call it holding the writer lock)."""
        if not journal.is_pending(self.store, cid):
            return False
        self._finish(cid, [])
        return True

    def recover(self, conversations: list[str] | None = None) -> list[str]:
        """Finish every forget a crash stopped (of ``conversations``, default all) whose writer is gone:
        the first thing any command of the store does. Returns the conversations finished."""
        todo = journal.pending(self.store) if conversations is None else [c for c in conversations if journal.is_pending(self.store, c)]
        done = []
        for cid in todo:
            writer = (journal.read(self.store, cid) or {}).get("writer") or {}
            if locks.writer_active(self.store, cid):
                continue  # a live writer is at it
            if not is_local(as_root(self.store)) and writer.get("pid") != os.getpid() and owner.alive(writer) is True:
                continue  # an object store has no lock: the journal's writer, alive on this host, is at it
            try:
                with self._writing(cid, wait_s=0):
                    if self._finish_if_interrupted(cid):
                        done.append(cid)
            except WriterBusy:
                continue  # another writer took it meanwhile: it finishes the forget first
            except BuildFailed as err:
                log.warning("an interrupted forget of %s could not be finished yet: %s", cid, err)
        return done

    def _scrub_instance(self, cid: str, build_id: str | None, whole: bool) -> tuple[int, list[str]]:
        instance = self.instance()
        if instance is None:
            return 0, []  # every build ran on an in-memory instance, gone with it
        from seem_dagster.defs.scrub import delete_runs

        return delete_runs(instance, cid, {build_id} if build_id else set(), whole=whole)


def _registered_elsewhere(root, cid: str, log_file: str) -> str | None:
    """The input file the conversation is registered from, when it is not the store's input log."""
    for source in (published_source(root, cid), _pending(root, cid)):
        if source is not None and source.path != in_store(root, log_file) and source.location(root) != log_file:
            return source.location(root)
    return None


def _pending(root, cid: str):
    return source_to_build(root, cid) if pending_path(root, cid).exists() else None


class _Log:
    """The input log as a writer holds it: its lines by ``id``, and each session's next free id number."""

    def __init__(self) -> None:
        self.lines: dict[str, dict] = {}
        self.following: dict[str, int] = {}

    def add(self, obj: dict) -> None:
        ref = str(obj.get("id"))
        self.lines[ref] = obj
        _follow(self.following, ref)


def _follow(following: dict[str, int], ref: str) -> None:
    session, _, number = ref.rpartition(":")
    if number.isdigit():
        following[session] = max(following.get(session, 0), int(number) + 1)


def _with_ids(logged: _Log, lines: list[str], stones: tombstones.Tombstones) -> list[str]:
    """Each new line with an explicit ``id``: ``<session>:<n>``, n past every number of that session
    the log or a forgotten turn has used, so its input id never changes when an earlier turn is
    forgotten, never clashes with a turn the log holds and is never a forgotten turn's."""
    given = {str(json.loads(line)["id"]) for line in lines if json.loads(line).get("id") is not None}
    following = dict(logged.following)
    for ref in [*stones.refs, *given]:
        _follow(following, ref)

    def used(ref: str) -> bool:
        return ref in logged.lines or ref in stones.refs or ref in given

    out = []
    for line in lines:
        obj = json.loads(line)
        if obj.get("id") is None:
            session = obj["session_id"]
            n = following.get(session, 0)
            while used(f"{session}:{n}"):
                n += 1
            obj["id"] = f"{session}:{n}"
            given.add(obj["id"])
            following[session] = n + 1
        out.append(json.dumps(obj, ensure_ascii=False))
    return out


def _not_logged(logged: _Log, lines: list[str]) -> list[str]:
    """``lines`` but those the log (``logged``: its lines by id) already holds as they are, with their
    ``id`` (an add retried after a crash or a failed build). A line whose id the log holds with other
    content stays, and the reader then refuses it as a duplicate id."""
    out = []
    for line in lines:
        obj = json.loads(line)
        if obj.get("id") is not None and logged.lines.get(str(obj["id"])) == obj:
            continue
        out.append(line)
    return out


def _as_turn_error(err: InputError, before: str, cid: str) -> InputError:
    earlier = len(jsonl_lines(before))
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


def _already(refs: tuple[str, ...]) -> str:
    shown = ", ".join(refs[:5]) + (f" and {len(refs) - 5} more" if len(refs) > 5 else "")
    return f"already forgotten: {shown}"


def _forgotten_before(root, cid: str, chosen) -> tuple[str, ...] | None:
    """What a forget of a conversation the store no longer holds names that an earlier forget removed
    (its tombstones stay): every turn it names, ("the whole conversation",), or what it asked for by
    speaker, session or date; None when it names anything a forgotten turn did not have, or the
    store never held the conversation."""
    stones = tombstones.read(root, cid)
    if not stones:
        return None
    if chosen.whole:
        return ("the whole conversation",)
    if chosen.turns and not set(chosen.turns) <= stones.refs | stones.passage_ids:
        return None
    if (chosen.speaker is not None and not stones.names("speaker", chosen.speaker)) or (
            chosen.session_id is not None and not stones.names("session", chosen.session_id)):
        return None
    return tuple(chosen.turns) if chosen.turns and chosen.speaker is None and chosen.session_id is None and chosen.before is None \
        else (f"every turn of {chosen.describe()}",)


def _known(root, cid: str) -> bool:
    """Whether the store holds anything of the conversation (a memory, a registration, an input log, an unfinished forget)."""
    return (published_source(root, cid) is not None or pending_path(root, cid).exists() or input_log.log_path(root, cid).exists()
            or journal.is_pending(root, cid))


def _published_passages(root, cid: str):
    try:
        return read_snapshot(root, cid, ["passages"])["passages"]
    except SnapshotError:
        return None


def _input_passages(root, cid: str):
    """The turns the next build of the conversation would read (forgotten ones left out), or None when
    its input cannot be read (the published memory is then all a forget can name)."""
    from seem_dagster.pipeline.ingest import read_registered

    try:
        _, conversation, _ = read_registered(root, cid)
    except (InputError, OSError, ValueError):
        return None
    return conversation.passages


def _union(published, incoming):
    """The turns a forget can name: the published memory's and the input's that are not built yet."""
    if published is None:
        return incoming
    if incoming is None:
        return published
    new = incoming.filter(~pl.col(Passages.passage_id).is_in(published[Passages.passage_id].to_list()))
    return pl.concat([published, new.select(published.columns)], how="vertical_relaxed") if new.height else published


def _nothing_left(root, cid: str) -> bool:
    """Whether the conversation's input holds no turn but forgotten ones (and no memory holds any other)."""
    from seem_dagster.pipeline.ingest import read_registered

    try:
        read_registered(root, cid)
    except ValueError as err:
        return "every turn of its input was forgotten" in str(err)
    except (InputError, OSError):
        published = _published_passages(root, cid)
        return published is not None and bool(tombstones.read(root, cid).forgotten(published).all())
    return False


def _published_build(root, cid: str) -> str | None:
    manifest = read_manifest(root, cid)
    return manifest["build_id"] if manifest else None


def _stored_texts(root, cid: str, stones: tombstones.Tombstones) -> list[str]:
    """The texts of forgotten turns still held by any build of the conversation (published, kept for
    readers, or left by a killed run): what the sweep of logs looks for."""
    from seem_dagster.store.snapshot import BUILDS, read_table

    texts: list[str] = []
    base = as_root(root) / BUILDS / file_stem(cid)
    folders = children(base)
    for folder in folders:
        path = folder / "passages.parquet"
        try:
            passages = read_table(path)
        except (SnapshotError, FileNotFoundError, OSError):
            continue
        texts += passages.filter(stones.forgotten(passages))[Passages.text].to_list()
    return texts


def _log_folders(root: str) -> list[Path]:
    from seem_dagster.defs.run_events import default_log_dir

    return list(dict.fromkeys([default_log_dir(root), default_log_dir()]))
