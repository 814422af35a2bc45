"""A build of several conversations while other processes hold every core: slower, never stuck.

A build once waited on a helper process in the scheduler's idle class, which two busy loops at
normal priority left with no core at all: such a build made no progress for minutes (scheduling's
note). Whatever the build waits on now (its parse workers) must not starve. Here the same three conversations are built quietly and then beside two busy
loops, each by `seem build` in a new process, and the loaded build must finish within a bounded
multiple of the quiet one with the same memory.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from conftest import SAMPLE, seem_cli
from seem_dagster.scheduling import cores

pytestmark = pytest.mark.slow  # two builds of three conversations, one beside busy loops

BOUND = 6.0  # the loaded build's time at most this multiple of the quiet one's (it shares the cores: about 2-3x)


def three_conversations(path):
    rows = [json.loads(line) for line in SAMPLE.read_text().splitlines() if line.strip()]
    with open(path, "w") as fh:
        for n in range(3):
            for row in rows:
                fh.write(json.dumps({**row, "conversation_id": f"c{n}"}) + "\n")
    return path


def build(source, store) -> float:
    started = time.monotonic()
    done = seem_cli("build", "--input", str(source), "--store", str(store), "--quiet", timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return time.monotonic() - started


# Spins until its parent is gone: a killed test run (no finally) must not leave loops eating the cores.
# The parent's pid comes in argv, not from getppid(): a parent killed before the child starts is seen.
BUSY_LOOP = "import os, sys\nparent = int(sys.argv[1])\nwhile os.getppid() == parent:\n    pass"


@pytest.mark.skipif(cores() < 2, reason="the helper only runs with two cores or more")
def test_three_conversations_build_beside_two_busy_loops_within_a_bounded_multiple_of_quiet_time(tmp_path):
    source = three_conversations(tmp_path / "three.jsonl")
    quiet = build(source, tmp_path / "quiet")
    loops = [subprocess.Popen([sys.executable, "-c", BUSY_LOOP, str(os.getpid())]) for _ in range(cores())]
    try:
        loaded = build(source, tmp_path / "loaded")
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
    assert loaded < BOUND * quiet, f"{loaded:.1f} s beside busy loops against {quiet:.1f} s quietly"
    from seem_dagster import Memory

    with Memory.open(tmp_path / "quiet") as a, Memory.open(tmp_path / "loaded") as b:
        assert a.conversations() == b.conversations() == ["c0", "c1", "c2"]
        assert all(a.index(c).passages.equals(b.index(c).passages) for c in a.conversations())
