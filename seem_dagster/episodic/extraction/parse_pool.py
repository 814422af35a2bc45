"""Worker processes that parse and extract a build's passages, started once and kept for the process.

spaCy's own ``n_process`` starts its workers for every call: about a third of a second per
conversation on two cores, which a build of many short conversations pays again and again. Here the
workers are forked once, with the pipeline already loaded, and each runs the whole extraction of a
batch (parse, rules, dates), so the rules run on both cores too and no parsed document is copied
back: only the extractions are. A batch's extractions are the same in any process.

No thread is started in this process: batches go out and results come back over one pipe per worker,
all in the calling thread. (A pool with a helper thread, as concurrent.futures has, lets Python's
garbage collector run in that thread, and Dagster's SQLite connections then refuse to close there.)

A worker ignores SIGINT, which a terminal sends to the whole process group: the main process decides
how a build stops (see interrupts), and an interrupt kills the workers with their queued batches.
SIGTERM ends a worker quietly. A worker that dies is noticed at once (its pipe closes): the pool is
dropped and the batches extracted in this process, so nothing is lost; the next build starts new
workers. Workers are daemonic, so they end with this process.
"""

from __future__ import annotations

import logging
import multiprocessing
import signal
import traceback
from collections import deque
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection, wait
from typing import TypeVar

from seem_dagster import interrupts

log = logging.getLogger(__name__)

In = TypeVar("In")
Out = TypeVar("Out")


class WorkerDied(Exception):
    pass


def _serve(work: Callable, conn: Connection) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # blocked across the fork (``_start``)
    # Forked inside a Dagster step, the worker would inherit Dagster's handler (an interrupt error with a
    # traceback) for the SIGTERM that ends daemonic children at exit: a worker just ends.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    while True:
        try:
            chunk = conn.recv()
        except EOFError:  # the main process is gone
            return
        if chunk is None:
            return
        try:
            reply = (True, work(chunk))
        except Exception:  # sent back as text: an exception object may not pickle
            reply = (False, traceback.format_exc())
        conn.send(reply)


class WorkerPool:
    """``work`` maps a list of inputs to a list of outputs of the same length, in order."""

    def __init__(self, work: Callable[[list[In]], list[Out]], processes: int):
        self.work = work
        self.processes = processes
        self._workers: list[tuple[multiprocessing.Process, Connection]] = []

    def map_chunks(self, items: Sequence[In], chunk: int) -> list[Out]:
        chunks = [list(items[i:i + chunk]) for i in range(0, len(items), chunk)]
        try:
            if not self._workers:
                self._start()
            parts = self._dispatch(chunks)
        except WorkerDied as exc:
            log.warning("a parse worker died (%s); extracting these %d passages in this process", exc, len(items))
            self.close(kill=True)
            parts = [self.work(c) for c in chunks]
        except BaseException:
            # An interrupt or a failed batch: the workers and their queued batches go with it.
            self.close(kill=True)
            raise
        return [out for part in parts for out in part]

    def _start(self) -> None:
        # Forked, so the workers start with what this process has loaded (the spaCy pipeline).
        context = multiprocessing.get_context("fork")
        for _ in range(self.processes):
            mine, theirs = context.Pipe()
            process = context.Process(target=_serve, args=(self.work, theirs), daemon=True, name="seem-extraction")
            # A Ctrl-C reaches the whole process group, a worker too before it ignores SIGINT: blocked
            # across the fork, the child inherits the block until it ignores the signal. The block holds
            # for this thread only, and the kernel may give the signal to another thread (polars',
            # torch's); Python then runs the handler here at its next line, which can be a library's
            # at-fork hook (filelock's), where its exception is only printed. So the handlers are held
            # too (``deferred``) and act once the worker is listed: an interrupt kills every worker started.
            previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
            try:
                with interrupts.deferred():
                    process.start()
                    theirs.close()  # so a dead worker's pipe reads as closed here
                    self._workers.append((process, mine))
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, previous)

    def _dispatch(self, chunks: list[list]) -> list[list]:
        parts: list = [None] * len(chunks)
        waiting = deque(enumerate(chunks))
        busy: dict[Connection, int] = {}

        def give(conn: Connection) -> None:
            index, chunk = waiting.popleft()
            try:
                conn.send(chunk)
            except OSError as exc:
                raise WorkerDied(exc) from exc
            busy[conn] = index

        for _, conn in self._workers:
            if waiting:
                give(conn)
        while busy:
            for conn in wait(list(busy)):
                try:
                    ok, value = conn.recv()
                except (EOFError, OSError) as exc:
                    raise WorkerDied(f"its pipe closed: {exc!r}") from exc
                index = busy.pop(conn)
                if not ok:
                    raise RuntimeError(f"batch {index + 1} of {len(chunks)} failed in an extraction worker:\n{value}")
                parts[index] = value
                if waiting:
                    give(conn)
        return parts

    def pids(self) -> list[int]:
        """The live workers' process ids (none before the first batch)."""
        return sorted(p.pid for p, _ in self._workers if p.is_alive())

    def close(self, kill: bool = False) -> None:
        """Stop the workers: asked to finish, or killed (an interrupt, a broken pool)."""
        for process, conn in self._workers:
            if not kill:
                try:
                    conn.send(None)
                except OSError:
                    pass
            else:
                process.kill()
        for process, conn in self._workers:
            process.join(timeout=10)
            if process.is_alive():
                process.kill()
                process.join()
            conn.close()
        self._workers = []
