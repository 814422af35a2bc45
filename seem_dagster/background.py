"""Helper processes that work on a core the build leaves idle, stopped while the build runs its own
parallel work (``pipeline.prefetch`` registers its process; MiniLM's encoding is such work).

In the scheduler's idle class a helper already yields a core to any thread of the build at once, but
not its caches: two MiniLM threads waking after each parallel section found a spaCy parse in the
core's caches, and a LoCoMo build's embedding steps took about a fifth longer beside it. So the
helpers are stopped (SIGSTOP) for the length of the encoding and continued after. A helper that its
build leaves stopped (a build killed meanwhile) gets SIGHUP and SIGCONT from the kernel, its process
group being orphaned, and ends.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading

_helpers: set[int] = set()
_lock = threading.Lock()
_depth = 0


def register(pid: int) -> None:
    with _lock:
        _helpers.add(pid)


def unregister(pid: int) -> None:
    with _lock:
        _helpers.discard(pid)


def _signal_all(signum: int) -> None:
    for pid in list(_helpers):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)


@contextlib.contextmanager
def exclusive():
    """The build's own parallel work: the helpers are stopped until the outermost block ends."""
    global _depth
    with _lock:
        _depth += 1
        if _depth == 1:
            _signal_all(signal.SIGSTOP)
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                _signal_all(signal.SIGCONT)
