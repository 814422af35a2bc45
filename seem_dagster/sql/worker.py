"""A process that runs SQL over the memory under a memory bound the operating system enforces.

DuckDB's ``memory_limit`` governs its buffer manager, not every value a function builds: one
``repeat('x', 2000000000) || ...`` held 15.8 GB of a 24 GB machine. Here, while a query runs, the
process's data segment (``RLIMIT_DATA``: heap and private anonymous mappings, which DuckDB's
allocations are) may grow by at most ``sql.memory_limit_mb`` beyond what it holds; an allocation past
that fails, and DuckDB answers with an out-of-memory error that ends the query, not the process.
Should the process die anyway, the pool (``pool.py``) starts another. Tables are loaded outside the
bound: they are the memory's own size, not what a query asks for.

Requests and replies are pickled dictionaries, length-prefixed, on stdin and stdout; nothing else is
written to stdout. Run by the pool as ``python -m seem_dagster.sql.worker``.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import resource
import struct
import sys
from collections import OrderedDict

from seem_dagster.config import SqlConfig
from seem_dagster.sql.guard import SqlRefused, first_line
from seem_dagster.sql.memory import SqlMemory, load_tables
from seem_dagster.store.snapshot import SnapshotError

HEADER = struct.Struct("!Q")
MAX_VIEWS = 8  # loaded scopes kept per worker, least recently used dropped first
MARGIN_MB = 64  # beyond the query's bound: the interpreter's own work around it (the reply, the result's conversion)


def read_message(stream) -> dict | None:
    head = stream.read(HEADER.size)
    if len(head) < HEADER.size:
        return None
    (size,) = HEADER.unpack(head)
    return pickle.loads(stream.read(size))


def write_message(stream, message: dict) -> None:
    body = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(HEADER.pack(len(body)) + body)
    stream.flush()


def data_bytes() -> int:
    """The process's data segment now (VmData), what RLIMIT_DATA bounds."""
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmData:"):
                return int(line.split()[1]) * 1024
    return 0  # pragma: no cover (Linux has it)


@contextlib.contextmanager
def bounded(megabytes: int):
    """Allocations past ``megabytes`` more than the process holds now fail, until the block ends."""
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    limit = data_bytes() + (megabytes + MARGIN_MB) * 2**20
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))


class Views:
    """The loaded scopes: (store, conversations, what each one's published memory is) -> SqlMemory."""

    def __init__(self):
        self._views: OrderedDict[tuple, SqlMemory] = OrderedDict()

    def get(self, request: dict) -> SqlMemory:
        key = (request["store"], request["key"])
        view = self._views.get(key)
        if view is None:
            conversations = request["conversations"]
            view = SqlMemory(load_tables(request["store"], conversations), SqlConfig(**request["config"]))
            self._drop_older(request["store"], dict(request["key"]))
            self._views[key] = view
            while len(self._views) > MAX_VIEWS:
                self._views.popitem(last=False)[1].close()
        self._views.move_to_end(key)
        return view

    def _drop_older(self, store: str, current: dict) -> None:
        """Views holding an older memory of a conversation are dropped now, not when they age out:
        after a forget, no worker keeps the forgotten rows."""
        for key in [k for k in self._views if k[0] == store and any(current.get(c, m) != m for c, m in k[1])]:
            self._views.pop(key).close()


def handle(request: dict, views: Views) -> dict:
    view = views.get(request)
    if request["op"] == "describe":
        return {"describe": {**view.describe(), "skipped": dict(view.skipped)}}
    config = view.config
    with bounded(config.memory_limit_mb):
        try:
            result = view.query(request["sql"])
        except MemoryError:
            raise SqlRefused(_over(config)) from None
        table = result.frame.to_arrow()
    if table.nbytes > config.max_result_mb * 2**20:
        raise SqlRefused(f"the result is {table.nbytes / 2**20:.1f} MB, over the limit of {config.max_result_mb} MB "
                         "(sql.max_result_mb): select fewer rows or shorter values")
    return {"table": table, "types": result.types, "truncated": result.truncated, "seconds": result.seconds,
            "skipped": result.skipped}


def _over(config: SqlConfig) -> str:
    return f"the query needs more memory than its bound of {config.memory_limit_mb} MB (sql.memory_limit_mb) and was stopped"


def main() -> None:
    requests = sys.stdin.buffer
    # The protocol owns the original stdout; file descriptor 1 becomes stderr, so that whatever
    # writes there (a print, a library's C code) goes to the log, not into a reply.
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    views = Views()
    while (request := read_message(requests)) is not None:
        try:
            reply = handle(request, views)
        except SqlRefused as err:
            text = str(err)
            if "Out of Memory" in text:
                text = _over(SqlConfig(**request["config"]))
            reply = {"refused": text}
        except SnapshotError as err:
            reply = {"snapshot_error": str(err)}
        except Exception as err:  # one line for the caller; the worker lives on
            reply = {"refused": f"the query failed: {first_line(err)}"}
        write_message(replies, reply)


if __name__ == "__main__":
    main()
