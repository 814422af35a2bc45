"""Writers of one conversation at once, as real processes on one store: two `seem build`s of the same
conversation take turns, and neither is lost; a writer that would wait longer than
``store.writer_wait_s`` is refused in one line, having written nothing."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import files_under, write_jsonl
from seem_dagster.store import locks
from seem_dagster.store.manifest import read_manifest

pytestmark = pytest.mark.slow  # builds through Dagster

SEEM = str(Path(sys.executable).parent / "seem")
CID = "duo"


def chat(path: Path, n: int, word: str) -> Path:
    return write_jsonl(path, [{"conversation_id": CID, "session_id": "s1", "timestamp": f"2024-06-01T10:{i:02d}:00",
                               "speaker": "Ana" if i % 2 else "Ben", "text": f"{word} note {i}: the {word} plan is on.", "id": f"{word}{i}"}
                              for i in range(n)])


def build(store: Path, path: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([SEEM, "build", "--input", str(path), "--store", str(store), "--quiet", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_two_builds_of_one_conversation_at_once_take_turns_and_neither_is_lost(tmp_path):
    store = tmp_path / "store"
    first, second = chat(tmp_path / "a.jsonl", 5, "alpha"), chat(tmp_path / "b.jsonl", 3, "beta")
    procs = [build(store, first), build(store, second)]
    outs = [p.communicate(timeout=900) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1][-2000:] for o in outs]
    said = sorted(int(out.split(f"{CID}: ")[1].split(" passages")[0]) for out, _ in outs)
    assert said == [3, 5]
    manifest = read_manifest(store, CID)
    # The last to publish holds the memory; the other published before it (its build is the previous one).
    published, previous = manifest["tables"]["passages"]["rows"], manifest["previous"]["tables"]["passages"]["rows"]
    assert sorted([published, previous]) == [3, 5]
    assert manifest["previous"]["build_id"] != manifest["build_id"]


def test_a_writer_waits_for_the_one_writing_then_builds(tmp_path):
    store = tmp_path / "store"
    path = chat(tmp_path / "a.jsonl", 3, "gamma")
    released = threading.Event()
    with locks.conversation_writer(store, CID):
        proc = build(store, path)
        time.sleep(8)
        assert proc.poll() is None  # waiting, nothing written
        assert not (store / "_manifests").exists()
        released.set()
    out, err = proc.communicate(timeout=900)
    assert proc.returncode == 0, err[-2000:]
    assert read_manifest(store, CID)["tables"]["passages"]["rows"] == 3


def test_a_writer_that_would_wait_too_long_is_refused_in_one_line_and_writes_nothing(tmp_path):
    store = tmp_path / "store"
    path = chat(tmp_path / "a.jsonl", 3, "delta")
    with locks.conversation_writer(store, CID):
        before = files_under(store)
        proc = build(store, path, "--set", "store.writer_wait_s=1")
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 1
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1 and "conversation 'duo'" in lines[0] and "is writing it" in lines[0], err
        assert "store.writer_wait_s" in lines[0] and "nothing was written" in lines[0]
        assert files_under(store) == before


def test_a_file_build_never_replaces_turns_add_acknowledged(tmp_path):
    """A conversation `add` wrote is its input log's: a file of the same id would have replaced every
    turn acknowledged (exit 0, the turns gone from the memory). It is refused in one line, nothing
    changed, and the next add builds on what was there."""
    from seem_dagster import Memory

    store = tmp_path / "store"
    with Memory.open(store) as memory:
        memory.add(CID, [{"speaker": "Ana", "text": "The kiln is booked for Friday.", "timestamp": "2024-06-01T09:00:00", "id": "a1"}])
    before = read_manifest(store, CID)
    done = subprocess.run([SEEM, "build", "--input", str(chat(tmp_path / "f.jsonl", 2, "gamma")), "--store", str(store), "--quiet"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "f.jsonl" in done.stderr and repr(CID) in done.stderr and "conversation_id" in done.stderr and "`add`" in done.stderr
    assert read_manifest(store, CID) == before
    with Memory.open(store) as memory:
        memory.add(CID, [{"speaker": "Ben", "text": "And the glaze order is in.", "timestamp": "2024-06-01T09:05:00", "id": "a2"}])
        assert sorted(memory.index(CID).passages["source_ref"]) == ["a1", "a2"]
