"""Worker processes that parse and extract a build's passages, started once and kept for the process.

spaCy's own ``n_process`` starts its workers for every call: about a third of a second per
conversation on two cores, which a build of many short conversations pays again and again. Here the
workers are forked once, with the pipeline already loaded, and each runs the whole extraction of a
batch (parse, rules, dates), so the rules run on both cores too and no parsed document is copied
back: only the extractions are. A batch's extractions are the same in any process.

A worker ignores SIGINT and SIGTERM: the main process decides how a build stops (see interrupts).
A pool whose worker died is dropped and the batch extracted in this process: nothing is lost, the
next build starts a new pool.
"""

from __future__ import annotations

import logging
import multiprocessing
import signal
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import TypeVar

log = logging.getLogger(__name__)

In = TypeVar("In")
Out = TypeVar("Out")

_work: Callable | None = None  # set in each worker by _start


def _start(work: Callable) -> None:
    global _work
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _work = work


def _run(chunk):
    return _work(chunk)


class WorkerPool:
    """``work`` maps a list of inputs to a list of outputs of the same length, in order."""

    def __init__(self, work: Callable[[list[In]], list[Out]], processes: int):
        self.work = work
        self.processes = processes
        self._executor: ProcessPoolExecutor | None = None

    def map_chunks(self, items: Sequence[In], chunk: int) -> list[Out]:
        chunks = [list(items[i:i + chunk]) for i in range(0, len(items), chunk)]
        if self._executor is None:
            # Forked, so the workers start with what this process has loaded (the spaCy pipeline).
            self._executor = ProcessPoolExecutor(self.processes, mp_context=multiprocessing.get_context("fork"),
                                                 initializer=_start, initargs=(self.work,))
        try:
            return [out for part in self._executor.map(_run, chunks) for out in part]
        except BrokenProcessPool as exc:
            log.warning("a parse worker died (%s); extracting these %d passages in this process", exc, len(items))
            self.close()
            return [out for c in chunks for out in self.work(c)]
        except BaseException:
            # An interrupt or a failed batch: the queued batches are dropped, not run to the end at exit.
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
            raise

    def pids(self) -> list[int]:
        """The live workers' process ids (none before the first batch); the executor keeps them privately."""
        return sorted(self._executor._processes) if self._executor is not None else []

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None
