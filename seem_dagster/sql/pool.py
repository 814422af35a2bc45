"""The worker processes SQL runs in (``worker.py``): each query bounded in memory by the operating
system and in time by a deadline, failing alone with one line while other queries carry on.

At most ``sql.workers`` processes, started on first use and kept; a query waits for a free one. A
worker past its deadline (a function DuckDB cannot interrupt) is killed, and one that died (its
memory bound reached outside DuckDB's reach) is replaced: the next query gets a fresh process.
"""

from __future__ import annotations

import os
import pickle
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import polars as pl

from seem_dagster.config import SqlConfig
from seem_dagster.sql.guard import SqlRefused
from seem_dagster.sql.memory import SqlResult
from seem_dagster.sql.worker import HEADER, write_message
from seem_dagster.store.snapshot import SnapshotError

# Beyond sql.timeout_s, which DuckDB's interrupt enforces inside the worker: loading a scope's tables,
# and a function that does not check for the interrupt. Past both, the worker is killed.
GRACE_S = 30.0


class WorkerGone(RuntimeError):
    pass


class Worker:
    def __init__(self):
        # Its own empty folder (0700) to run in: the only folder its DuckDB names (sql.memory), removed with it.
        self.folder = tempfile.mkdtemp(prefix="seem-sql-")
        try:
            self.proc = subprocess.Popen([sys.executable, "-m", "seem_dagster.sql.worker"], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=None, close_fds=True, cwd=self.folder)
        except BaseException:
            shutil.rmtree(self.folder, ignore_errors=True)
            raise

    def call(self, request: dict, deadline: float) -> dict:
        try:
            write_message(self.proc.stdin, request)
        except (BrokenPipeError, OSError):
            raise WorkerGone("the SQL worker stopped") from None
        size = HEADER.unpack(self._read(HEADER.size, deadline))[0]
        return pickle.loads(self._read(size, deadline))

    def _read(self, n: int, deadline: float) -> bytes:
        fd, chunks, got = self.proc.stdout.fileno(), [], 0
        while got < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, min(n - got, 1 << 20))
            if not chunk:
                raise WorkerGone("the SQL worker stopped")
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            stream.close()
        shutil.rmtree(self.folder, ignore_errors=True)


def _located(store: str) -> str:
    """A local store named absolutely: the worker runs in a folder of its own."""
    return store if "://" in store else os.path.abspath(store)


class SqlPool:
    def __init__(self, config: SqlConfig):
        self.config = config
        self._idle: list[Worker] = []
        self._started = 0
        self._closed = False
        self._cond = threading.Condition()

    def query(self, store: str, conversations, key, sql: str) -> SqlResult:
        reply = self._call({"op": "query", "store": _located(store), "conversations": conversations, "key": key, "sql": sql,
                            "config": self.config.model_dump()})
        return SqlResult(pl.from_arrow(reply["table"]), reply["types"], reply["truncated"], reply["seconds"], reply["skipped"])

    def describe(self, store: str, conversations, key) -> dict:
        return self._call({"op": "describe", "store": _located(store), "conversations": conversations, "key": key,
                           "config": self.config.model_dump()})["describe"]

    def _call(self, request: dict) -> dict:
        worker = self._checkout()
        healthy = False
        try:
            reply = worker.call(request, time.monotonic() + self.config.timeout_s + GRACE_S)
            healthy = True
        except TimeoutError:
            raise SqlRefused(f"query stopped after the time limit of {self.config.timeout_s:g} s (sql.timeout_s)") from None
        except WorkerGone:
            raise SqlRefused(f"the query needs more memory than its bound of {self.config.memory_limit_mb} MB "
                             "(sql.memory_limit_mb) and was stopped") from None
        finally:
            self._checkin(worker, healthy)
        if "refused" in reply:
            raise SqlRefused(reply["refused"])
        if "snapshot_error" in reply:
            raise SnapshotError(reply["snapshot_error"])
        return reply

    def _checkout(self) -> Worker:
        with self._cond:
            while not self._idle and self._started >= self.config.workers:
                if self._closed:
                    raise SqlRefused("the SQL workers are stopped")
                self._cond.wait()
            if self._idle:
                return self._idle.pop()
            self._started += 1
        try:
            return Worker()
        except BaseException:
            with self._cond:
                self._started -= 1
                self._cond.notify()
            raise

    def _checkin(self, worker: Worker, healthy: bool) -> None:
        if not healthy or not worker.alive() or self._closed:
            worker.stop()
            with self._cond:
                self._started -= 1
                self._cond.notify()
            return
        with self._cond:
            self._idle.append(worker)
            self._cond.notify()

    def worker_pids(self) -> list[int]:
        with self._cond:
            return [w.proc.pid for w in self._idle]

    def close(self) -> None:
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            self._started -= len(idle)
            self._cond.notify_all()
        for worker in idle:
            worker.stop()
