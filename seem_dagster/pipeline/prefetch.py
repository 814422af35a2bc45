"""Extract the next conversation's passages while this process builds the current one.

A build of many conversations is one Dagster run after another, and most of a run other than its
extraction (Dagster's bookkeeping, fusion, the graph, Parquet, the checks) is one thread: a core sits
idle. A helper process at the lowest niceness fills it: it extracts the next conversation's
passages that its extraction cache does not hold and saves them there. The next run's extraction
step then finds them in the cache, exactly as after an earlier build (the same key, the same JSON:
an extraction does not depend on the process or the batch). The build hands it those passages, read
from the registered source as the run's ingest reads them: the build's process keeps a local input
file parsed, and a second copy in the prefetch process would cost as much again (about 0.7 GB for a
file the size of LongMemEval_S). A remote input is downloaded and hashed at every read, so the
prefetch process reads that one itself, off the build's path.

The process is a new interpreter (``prefetch_worker``), not a fork: this process has thread pools by
then (polars, Arrow, torch, the tokenizers), and a child forked from it deadlocked on a lock one of
them held. Nor is it multiprocessing's spawn, which imports the parent's main script again (a user's
script without a main guard would run twice). It loads its own spaCy pipeline (a few seconds at the
lowest priority, once per build) and runs in a process group of its own, so a terminal's Ctrl-C, which
reaches the build's group, does not reach it: the build decides how it stops. (Not a session of its
own: the kernel shares the CPU fairly between sessions first, and the lowest priority would count only
inside one.)

The build never waits on it without a bound (``scheduling``): the next conversation's turns go to it
in a file, not down the socket (a full socket would block the build until the helper reads), and a
reply that does not come within ``scheduling.HELPER_REPLY_S`` ends the helper: the run extracts the
turns itself.

Before a conversation's run starts, its prefetch is stopped: the process saves what it has extracted
(within one batch of ``CHUNK`` passages) and the run extracts the rest. A process still loading its
pipeline is not waited for (the first prefetch of a build, when the conversations are small). Nothing depends on it: a
prefetch that fails (a source that does not load: the run's ingest reports it) saves nothing, and a
process that dies is reported once and not replaced for the rest of the build. It is killed with the
build on an interrupt, and ends by itself when the build's process is gone (its socket closes).
"""

from __future__ import annotations

import logging
import os
import pickle
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from multiprocessing.connection import Connection

from seem_dagster.extraction.interface import PassageInput, inputs_from_passages
from seem_dagster.ingest.load import file_version
from seem_dagster.pipeline.extract import cache_name
from seem_dagster.pipeline.ingest import read_registered
from seem_dagster.scheduling import HELPER_REPLY_S
from seem_dagster.store.cache import ConversationCache
from seem_dagster.store.sources import source_to_build

log = logging.getLogger(__name__)

CHUNK = 8  # passages extracted between two looks for a stop: what a stop waits for at most
STOP = "stop"
READY = (None, "ready")  # the process's first message: its pipeline is loaded


def prefetch_inputs(root, conversation_id: str, *, local_only: bool = False) -> list[PassageInput] | None:
    """The passages of ``conversation_id``'s registered source, as its run's extraction step sees them;
    with ``local_only``, None for a source that is not a local file (``file_version``)."""
    if local_only and file_version(source_to_build(root, conversation_id).path) is None:
        return None
    _, conv, _ = read_registered(root, conversation_id)
    return inputs_from_passages(conv.passages)


def warm_extraction_cache(root, conversation_id: str, inputs: list[PassageInput], extractor, stopped=lambda: False) -> int:
    """Extract those of ``inputs`` (``prefetch_inputs``) that the conversation's extraction cache does
    not hold, and save them there; stop early when ``stopped()``. Returns how many were saved."""
    if stopped():  # stopped before it began (asked while the process was starting)
        return 0
    cache = ConversationCache(root, conversation_id)
    name = cache_name(extractor)
    saved = cache.kv("extraction", name)
    todo: dict[str, object] = {}
    for inp in inputs:
        key = inp.cache_key(extractor.name, extractor.version)
        if key not in saved:
            todo.setdefault(key, inp)
    keys, inputs = list(todo), list(todo.values())
    new: dict[str, str] = {}
    for start in range(0, len(inputs), CHUNK):
        if stopped():
            break
        for key, result in zip(keys[start:start + CHUNK], extractor.extract_here(inputs[start:start + CHUNK])):
            new[key] = result.to_json()
    if new:
        cache.put_kv("extraction", name, {**saved, **new})  # nothing else writes it until the prefetch stops
    return len(new)


def serve(root: str, model: str, conn: Connection) -> None:
    """The prefetch process's loop: (conversation id, its passage inputs, or None to read them here)
    to prefetch, ``STOP``, or None to end."""
    from seem_dagster.extraction.embedded import EmbeddedExtractor

    extractor = EmbeddedExtractor(model, processes=1)
    _ = extractor.nlp  # loaded before the first job, then said: until then a stop does not wait for the start-up
    try:
        conn.send(READY)
    except OSError:
        return
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):  # the build is gone
            return
        if message is None:
            return
        if message == STOP:  # for a prefetch that had finished already
            continue
        try:
            conversation_id, path = message
            inputs = prefetch_inputs(root, conversation_id) if path is None else _take(path)
            reply = (True, warm_extraction_cache(root, conversation_id, inputs, extractor, stopped=conn.poll))
        except Exception:
            reply = (False, traceback.format_exc())
        try:
            conn.send(reply)
        except OSError:  # the build is gone
            return


def _take(path: str) -> list[PassageInput]:
    """The inputs the build wrote for this prefetch (``ExtractionPrefetch.start``); the file goes."""
    try:
        with open(path, "rb") as fh:
            return pickle.load(fh)
    finally:
        os.unlink(path)


def _handed(inputs: list[PassageInput] | None) -> str | None:
    """``inputs`` in a temp file the helper reads and removes (None: it reads the source itself)."""
    if inputs is None:
        return None
    fd, path = tempfile.mkstemp(prefix="seem-prefetch-", suffix=".pickle")
    with os.fdopen(fd, "wb") as fh:
        pickle.dump(inputs, fh, protocol=pickle.HIGHEST_PROTOCOL)
    return path


def _spawn(root, model: str) -> tuple[subprocess.Popen, Connection]:
    mine, theirs = socket.socketpair()
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "seem_dagster.pipeline.prefetch_worker", str(theirs.fileno()), str(root), model],
            pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, process_group=0,
        )
    finally:
        theirs.close()  # the child has its copy; closed here so a dead child's socket reads as closed
    return process, Connection(mine.detach())


class ExtractionPrefetch:
    """One background process for a build of several conversations (``defs.runner``): ``start(next)``
    before a run, ``finish()`` before ``next``'s own run, ``close()`` after the build."""

    def __init__(self, root, model: str):
        self.root = root
        self.model = model
        self.saved = 0  # passages the prefetches saved
        self._worker: tuple[subprocess.Popen, Connection] | None = None
        self._job: str | None = None
        self._ready = False
        self._owed = 0  # replies of prefetches stopped while the process was starting, still to be read
        self._broken = False

    def start(self, conversation_id: str) -> None:
        self.finish()
        if self._broken:
            return
        if self._worker is None:
            self._worker = _spawn(self.root, self.model)
        try:
            # A local file is parsed once in this process, for the runs' ingest too; a remote one is read by the prefetch.
            path = _handed(prefetch_inputs(self.root, conversation_id, local_only=True))
        except Exception:  # the run reads the same source and reports what is wrong with it
            log.info("prefetching the extraction of %s failed; its run extracts it:\n%s", conversation_id, traceback.format_exc())
            return
        try:
            self._worker[1].send((conversation_id, path))  # a few bytes: never blocks on the helper
        except OSError as exc:
            if path is not None:
                os.unlink(path)
            self._died(exc)
            return
        self._job = conversation_id

    def finish(self, stop: bool = True) -> None:
        """Stop the prefetch under way, or with ``stop=False`` let it complete; what it extracted is in
        the cache when this returns. A process still starting up is not waited for: it is told to stop,
        and the prefetch saves nothing."""
        if self._job is None:
            return
        job, self._job = self._job, None
        conn = self._worker[1]
        deadline = time.monotonic() + (HELPER_REPLY_S if stop else 12 * HELPER_REPLY_S)  # a whole prefetch takes longer
        try:
            if stop:
                conn.send(STOP)
                if not self._ready and not self._poll_ready(conn):
                    self._owed += 1
                    return
            while self._owed:
                self._reply(conn, None, deadline)
                self._owed -= 1
            self._reply(conn, job, deadline)
        except (EOFError, OSError, TimeoutError) as exc:
            self._died(exc)

    def _poll_ready(self, conn: Connection) -> bool:
        if conn.poll():  # its first message can only be READY
            conn.recv()
            self._ready = True
        return self._ready

    @staticmethod
    def _recv(conn: Connection, deadline: float):
        if not conn.poll(max(0.0, deadline - time.monotonic())):
            raise TimeoutError(f"no reply within {HELPER_REPLY_S:g} s (scheduling.HELPER_REPLY_S): the machine is busy")
        return conn.recv()

    def _reply(self, conn: Connection, job: str | None, deadline: float) -> None:
        message = self._recv(conn, deadline)
        if message == READY:
            self._ready = True
            message = self._recv(conn, deadline)
        ok, value = message
        if ok:
            self.saved += value
        elif job is not None:  # the run reads the same source and reports what is wrong with it
            log.info("prefetching the extraction of %s failed; its run extracts it:\n%s", job, value)

    def _died(self, exc: BaseException) -> None:
        log.warning("the extraction prefetch process ended (%r); the rest of the build extracts without it", exc)
        self._broken = True
        self._job = None
        self.close(kill=True)

    def pid(self) -> int | None:
        return self._worker[0].pid if self._worker is not None and self._worker[0].poll() is None else None

    def close(self, kill: bool = False) -> None:
        if self._worker is None:
            return
        process, conn = self._worker
        try:
            ready = self._ready or self._poll_ready(conn)
        except (EOFError, OSError):
            ready = False
        self._worker, self._job, self._ready, self._owed = None, None, False, 0
        if kill or not ready:
            # A process still loading its pipeline has nothing to save (its jobs were all stopped before
            # it could begin them): killed, not waited for (finishing the start-up only to exit cost a
            # build ending meanwhile 0.6-1.0 s).
            process.kill()
        else:
            try:
                conn.send(None)
            except OSError:
                pass
        try:
            process.wait(timeout=HELPER_REPLY_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        conn.close()
