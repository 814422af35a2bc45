"""Named crash points: where the fault-injection test kills a writer, as SQLite's crash tests do.

A write (a build, an add, a forget) passes named points: before and after each table it writes, the
manifest's publish, the sweep of older builds, the input log's rewrite, the Dagster scrub. With
``SEEM_CRASH_AT=<point>`` in its environment, a process that reaches that point kills itself with
SIGKILL there (``<point>@<n>``: the n-th time it gets there), exactly as ``kill -9`` from outside
would stop it, with no handler or ``finally`` run. ``tests/test_crash_points.py`` goes through every
point of ``POINTS`` and checks what a reader, a retry and a forget are promised (docs/guarantees.md).

Outside that test the variable is unset and a point costs one lookup in the environment.
"""

from __future__ import annotations

import os
import signal

ENV = "SEEM_CRASH_AT"

# A build: every table it writes (point ``table.<asset>.before`` / ``.after``), then the publish.
TABLE_POINTS = ("before", "after")
PUBLISH = ("publish.before_manifest", "publish.after_manifest", "publish.after_sources", "publish.after_sweep")
# An add: the input log made durable, then a build (its points above).
ADD = ("add.before_log_write", "add.after_log_write")
# An add appended to a current memory: the input log (ADD), the commit's tables (their ``after``
# points), then its manifest and the registry.
APPEND = ("append.before_manifest", "append.after_manifest", "append.after_sources")
# A forget, in the order it runs; the rebuild between its input-log rewrite and its sweep is a build.
FORGET = ("forget.after_journal", "forget.after_tombstones", "forget.after_logs", "forget.after_input_log_rewrite",
          "forget.after_cache_purge", "forget.after_rebuild", "forget.after_retire", "forget.after_cache_prune",
          "forget.before_dagster_scrub", "forget.after_dagster_scrub")


def table_point(asset: str, when: str) -> str:
    return f"table.{asset}.{when}"


def points(tables) -> list[str]:
    """Every named point of a build writing ``tables``, an add and a forget."""
    return [table_point(t, w) for t in tables for w in TABLE_POINTS] + [*PUBLISH, *ADD, *APPEND, *FORGET]


_reached: dict[str, int] = {}


def point(name: str) -> None:
    """A named point: the process dies here when ``SEEM_CRASH_AT`` names it."""
    wanted = os.environ.get(ENV)
    if not wanted:
        return
    target, _, nth = wanted.partition("@")
    if target != name:
        return
    _reached[name] = _reached.get(name, 0) + 1
    if _reached[name] >= (int(nth) if nth.isdigit() else 1):
        os.kill(os.getpid(), signal.SIGKILL)
