"""SIGINT and SIGTERM: stop promptly, and never half-way through publishing a memory.

`seem build` and `seem eval` call ``install()``. A signal outside a Dagster run raises ``Interrupted``
at once. Inside a run Dagster turns it into an interrupted step: the run fails, so its build is never
published, and the runner raises ``Interrupted`` before the next conversation. A publish runs inside
``deferred()``: a signal that arrives then takes effect right after the manifest is written, so a
build is published whole or not at all. Exit codes follow the shell's: 128 + the signal (130, 143).

Dagster points SIGTERM at its own SIGINT handler while a run executes, so which signal came is read
from ``signal.set_wakeup_fd``, which the interpreter writes for every signal before any handler runs.

A Python signal handler's exception can be lost: when the signal lands while the interpreter runs a
callback whose exceptions it only prints (a weakref or import-lock callback, a ``__del__``), the
build would go on as if nothing came. So the wakeup record is also checked where it matters:
``stop_if_received()`` before every table is written, before a publish and by the runner before each
conversation, so a signal that was swallowed still stops the build at the next table and publishes nothing.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KeyboardInterrupt):
    def __init__(self, signum: int, detail: str = ""):
        super().__init__(signum, detail)
        self.signum = signum
        self.detail = detail

    @property
    def exit_code(self) -> int:
        return 128 + self.signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    def __str__(self) -> str:
        return f"interrupted by {self.name}" + (f": {self.detail}" if self.detail else "")


_received: list[int] = []
_arrived = threading.Event()
_installed = False


def _reader(fd: int) -> None:
    while True:
        try:
            data = os.read(fd, 64)
        except OSError:
            return
        if not data:
            return
        _received.extend(b for b in data if b in SIGNALS)
        if _received:
            _arrived.set()


def _raise(signum: int, frame) -> None:
    raise Interrupted(signum)


def install() -> None:
    """Handle SIGINT and SIGTERM in this process (its main thread) as described above."""
    global _installed
    if _installed or threading.current_thread() is not threading.main_thread():
        return
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    threading.Thread(target=_reader, args=(read_fd,), name="seem-signals", daemon=True).start()
    for signum in SIGNALS:
        signal.signal(signum, _raise)
    _installed = True


def received(wait: float = 1.0) -> int | None:
    """The last SIGINT or SIGTERM this process got since ``install()``, if any (waits up to ``wait``
    seconds for the reader thread when a run just ended interrupted)."""
    if not _installed:
        return None
    if not _received:
        _arrived.wait(wait)
    return _received[-1] if _received else None


def stop_if_received(what: str = "") -> None:
    """Raise ``Interrupted`` if this process got SIGINT or SIGTERM since ``install()`` (even one whose
    handler's exception was swallowed); nothing when ``install()`` was not called (the daemon, tests)."""
    if _installed and _received:
        raise Interrupted(_received[-1], what)


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Hold SIGINT and SIGTERM until the block is done, then act on them as the handler in place
    before would have (Dagster's raises an interrupted-step error, ours ``Interrupted``)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    before = {s: signal.getsignal(s) for s in SIGNALS}
    for s in SIGNALS:
        signal.signal(s, lambda signum, frame: held.append(signum))
    try:
        yield
    finally:
        for s, handler in before.items():
            signal.signal(s, handler if handler is not None else signal.SIG_DFL)
    if held:
        handler = before[held[0]]
        if callable(handler):
            handler(held[0], None)
        elif handler == signal.SIG_DFL:
            signal.raise_signal(held[0])
