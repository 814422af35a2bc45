"""Which process wrote something, and whether it is still alive: what lets the store clean up after
a writer that was killed (`kill -9`, a lost machine) without ever removing what a live one still needs.

A record names the host, the process id and the process's start time (so a reused pid is not taken
for the writer). Liveness is known only on the same host; elsewhere the caller falls back on age.
"""

from __future__ import annotations

import functools
import hashlib
import os
import socket


@functools.cache
def host_tag() -> str:
    """A short, file-name-safe tag of this host."""
    return hashlib.blake2b(socket.gethostname().encode(), digest_size=4).hexdigest()


def _start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (Linux), None where /proc is not there."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its closing one.
    fields = stat[stat.rfind(b")") + 2:].split()
    try:
        return int(fields[19])  # field 22 of stat(5), counted from field 3
    except (IndexError, ValueError):
        return None


def me() -> dict:
    return {"host": host_tag(), "pid": os.getpid(), "pid_start": _start_ticks(os.getpid())}


def alive(record: dict) -> bool | None:
    """True or False for a process of this host; None when the record is from another host."""
    if record.get("host") != host_tag():
        return None
    pid = record.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by someone else
        pass
    started = record.get("pid_start")
    return started is None or _start_ticks(pid) in (None, started)
