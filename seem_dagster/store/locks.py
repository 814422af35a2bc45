"""Locks that hold across the processes of one host and the threads of one process (local stores).

POSIX record locks (``lockf``), not ``flock``: a child forked while a lock is held does not inherit
it. With ``flock`` a forked worker (a parse pool, a step process) keeps the lock after the parent lets
go, and the parent's next lock waits on its own child for ever. A record lock belongs to the process,
so threads of one process are kept apart by a thread lock per file, and the file stays open (closing
any descriptor of it would release the process's lock) while any of the process's holders holds it.
The holder writes who it is into the file, so a writer that has to wait or give up can say who holds it.

``conversation_writer`` is the lock every writer of a conversation holds for the whole of its write
(an add, a file's build, a forget, the completion of a forget a crash interrupted): two writers of a
conversation take turns. Object stores have no such lock; there a publish is conditional instead
(``store.builds.publish``), so a lost race is reported, not silent.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timezone

from seem_dagster.store import owner
from seem_dagster.store.files import as_root, is_local
from seem_dagster.store.keys import file_stem

FOLDER = "_locks"
POLL_S = 0.05


class Busy(RuntimeError):
    """Another writer held the lock for longer than the caller would wait: one line saying who."""


class _FileLock:
    def __init__(self):
        self.thread_lock = threading.RLock()
        self.fd: int | None = None
        self.depth = 0


_locks: dict[str, _FileLock] = {}
_guard = threading.Lock()


def _lock_of(path: str) -> _FileLock:
    with _guard:
        return _locks.setdefault(path, _FileLock())


def holder(path: str) -> dict:
    """What the current holder of a lock file wrote about itself ({} when unknown)."""
    try:
        with open(path, encoding="utf-8") as fh:
            return json.loads(fh.read() or "{}")
    except (OSError, ValueError):
        return {}


def _describe(record: dict) -> str:
    if not record:
        return "another process"
    where = "this host" if record.get("host") == owner.host_tag() else f"host {record.get('host')}"
    return f"process {record.get('pid')} on {where} (since {record.get('since')})"


def _acquire(fd: int, deadline: float | None, path: str, what: str) -> None:
    while True:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | (fcntl.LOCK_NB if deadline is not None else 0))
            return
        except (BlockingIOError, PermissionError):
            if time.monotonic() >= deadline:
                raise Busy(f"{what}: {_describe(holder(path))} is writing it; try again when it ends") from None
            time.sleep(POLL_S)


@contextlib.contextmanager
def hold(path: str, *, wait_s: float | None = None, what: str = "", record: bool = False) -> Iterator[None]:
    """Hold the lock file ``path`` (made if missing). ``wait_s``: give up with ``Busy`` after this long
    (None: wait as long as it takes). ``record``: write this process into the file while it holds it."""
    lock = _lock_of(path)
    if not lock.thread_lock.acquire(timeout=-1 if wait_s is None else wait_s):
        raise Busy(f"{what}: another thread of this process is writing it; try again when it ends")
    try:
        if lock.depth == 0:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                _acquire(fd, None if wait_s is None else time.monotonic() + wait_s, path, what)
            except BaseException:
                os.close(fd)
                raise
            lock.fd = fd
            if record:
                body = json.dumps({**owner.me(), "what": what, "since": datetime.now(timezone.utc).isoformat(timespec="seconds")})
                os.ftruncate(fd, 0)
                os.pwrite(fd, body.encode(), 0)
        lock.depth += 1
        try:
            yield
        finally:
            lock.depth -= 1
            if lock.depth == 0:
                fd, lock.fd = lock.fd, None
                if record:
                    os.ftruncate(fd, 0)  # a released lock names no holder (a killed one's record stays: it says who died)
                os.close(fd)  # releases the record lock
    finally:
        lock.thread_lock.release()


def lock_path(root, conversation_id: str) -> str:
    return os.path.join(as_root(root).path, FOLDER, f"{file_stem(conversation_id)}.lock")


@contextlib.contextmanager
def conversation_writer(root, conversation_id: str, wait_s: float | None = None) -> Iterator[None]:
    """One writer of a conversation at a time on this host (local stores; see the module's note)."""
    if not is_local(as_root(root)):
        yield
        return
    with hold(lock_path(root, conversation_id), wait_s=wait_s, what=f"conversation {conversation_id!r}", record=True):
        yield


def writer_active(root, conversation_id: str) -> bool:
    """Whether a writer of the conversation holds its lock now (local stores; False elsewhere)."""
    if not is_local(as_root(root)):
        return False
    path = lock_path(root, conversation_id)
    if not os.path.exists(path):
        return False
    lock = _lock_of(path)
    if not lock.thread_lock.acquire(blocking=False):
        return True  # a thread of this process writes it
    try:
        if lock.depth:
            return True
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except (BlockingIOError, PermissionError):
            return True
        finally:
            os.close(fd)  # (also releases the probe's lock: no holder of this process has it open)
        return False
    finally:
        lock.thread_lock.release()


@contextlib.contextmanager
def exclusive(folder, name: str) -> Iterator[None]:
    """One holder at a time of ``<folder>/.<name>.lock`` across processes and threads of this host
    (local stores). Object stores have no such lock: there it holds nothing, and callers say what
    that means for them."""
    folder = as_root(folder)
    if not is_local(folder):
        yield
        return
    with hold(os.path.join(folder.path, f".{name}.lock")):
        yield
