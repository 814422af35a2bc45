"""A forget removes exactly what it names, through the real `Memory` and Dagster builds: turns the input
log holds but no build published yet are kept unless named; a retry of a forget finishes it; turns
added after a forget get ids of their own; a bad argument is one line. And a store is its own: a copy
reads its own input log, never the original's."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from conftest import occurrences
from seem_dagster import InvalidRequest, Memory

pytestmark = pytest.mark.slow  # builds through Dagster

CID = "kim"
CANARY = "quixotral"
ADD_SCRIPT = """
import json, sys
from seem_dagster import Memory
with Memory.open(sys.argv[1]) as memory:
    memory.add(sys.argv[2], json.loads(sys.argv[3]))
"""


def turn(ref: str, day: int, text: str, speaker: str = "Kim") -> dict:
    return {"speaker": speaker, "text": text, "timestamp": f"2024-03-{day:02d}T10:00:00", "id": ref}


FIRST = [turn("k1", 1, "I moved to Porto in January."), turn("k2", 2, "My neighbour plays the cello every night.", "Lee")]
LATER = turn("k3", 10, f"On Saturday I found a {CANARY} shell on the beach in April.")


def refs(memory: Memory, cid: str = CID) -> list[str]:
    return sorted(memory.index(cid).passages["source_ref"].to_list())


def logged_refs(store: Path, cid: str = CID) -> list[str]:
    log = store / "_inputs" / f"{cid}.jsonl"
    return sorted(json.loads(line)["id"] for line in log.read_text().splitlines() if line.strip()) if log.exists() else []


def add_killed_mid_build(store: Path, turns: list[dict], written=None) -> None:
    """`Memory.add` in a process killed with SIGKILL once its build has written its first table (or
    once ``written()`` says so): the turns are in the input log, not in the published memory. The add
    is a run of the build job (``store.append`` off): an append publishes within milliseconds of its
    first table, so a kill from outside could land after it (test_crash_points kills appends at named points)."""
    before = {p.name for p in (store / "_builds" / CID).iterdir()}
    started = lambda: any((b / "passages.parquet").exists() for b in (store / "_builds" / CID).iterdir() if b.name not in before)  # noqa: E731
    proc = subprocess.Popen([sys.executable, "-c", ADD_SCRIPT, str(store), CID, json.dumps(turns)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, "SEEM_STORE_APPEND": "false"})
    try:
        deadline = time.monotonic() + 300
        while not (written or started)():
            assert proc.poll() is None and time.monotonic() < deadline, "the add ended before its build wrote what it waits for"
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.fixture
def unbuilt(tmp_path):
    """k1, k2 built and published; k3 received into the input log by an add killed mid-build."""
    store = tmp_path / "store"
    with Memory.open(store) as memory:
        memory.add(CID, FIRST)
    add_killed_mid_build(store, [LATER])
    assert logged_refs(store) == ["k1", "k2", "k3"]
    with Memory.open(store) as memory:
        assert refs(memory) == ["k1", "k2"]
    return store


def test_a_forget_of_every_published_turn_keeps_the_turn_the_log_holds_unbuilt(unbuilt):
    with Memory.open(unbuilt) as memory:
        done = memory.forget(CID, turns=["k1", "k2"])
        assert done.turns == 2 and done.build_id is not None
        assert logged_refs(unbuilt) == ["k3"]
        assert refs(memory) == ["k3"]  # the conversation is rebuilt from what stays, the unbuilt turn included
        assert [h.source_ref for h in memory.search(CID, "What did Kim find on the beach?", k=1)] == ["k3"]


def test_a_forget_before_a_date_keeps_later_turns_the_log_holds_unbuilt(unbuilt):
    with Memory.open(unbuilt) as memory:
        done = memory.forget(CID, before="2024-03-03")
        assert sorted(done.source_refs) == ["k1", "k2"]
        assert logged_refs(unbuilt) == ["k3"] and refs(memory) == ["k3"]


def test_an_unbuilt_turn_the_forget_names_is_forgotten_and_leaves_no_trace(unbuilt):
    with Memory.open(unbuilt) as memory:
        done = memory.forget(CID, turns=["k3"])
        assert done.source_refs == ("k3",) and refs(memory) == ["k1", "k2"]
    assert logged_refs(unbuilt) == ["k1", "k2"]
    assert occurrences(unbuilt, needle=CANARY) == []  # not in the killed build's tables, nor in its cache entries


def test_a_forgotten_unbuilt_turn_leaves_nothing_in_the_caches_a_killed_build_wrote_from_all_turns(tmp_path):
    """The killed build had written its properties cache (made from all the turns at once) with the
    unbuilt turn in it; the forget names only that turn, so nothing is rebuilt, and the cache goes."""
    store = tmp_path / "store"
    with Memory.open(store) as memory:
        memory.add(CID, FIRST)
    stated = turn("k3", 10, f"My heron {CANARY.title()} eats sardines, and I moved to {CANARY.title()}ville in March.")

    def properties_cached() -> bool:
        try:
            return bool(occurrences(store / "_cache" / "properties", needle=CANARY))
        except OSError:  # a temp file renamed or half written as it is read
            return False

    add_killed_mid_build(store, [stated], written=properties_cached)
    with Memory.open(store) as memory:
        done = memory.forget(CID, turns=["k3"])
        assert done.source_refs == ("k3",) and refs(memory) == ["k1", "k2"]
        assert memory.properties(CID).filter(pl.col("value") == "Porto").height == 1  # the memory's own rows stay
    assert occurrences(store, needle=CANARY) == []


def test_naming_every_turn_the_log_holds_forgets_the_whole_conversation(unbuilt):
    with Memory.open(unbuilt) as memory:
        done = memory.forget(CID, turns=["k1", "k2", "k3"])
        assert done.turns == 3 and done.build_id is None and memory.conversations() == []
    assert not (unbuilt / "_inputs" / f"{CID}.jsonl").exists() and occurrences(unbuilt, needle=CANARY) == []


def test_a_retried_forget_of_a_turn_already_forgotten_says_so_and_exits_0(tmp_path):
    store = tmp_path / "store"
    with Memory.open(store) as memory:
        memory.add(CID, [*FIRST, LATER])
        memory.forget(CID, turns=["k3"])
        again = memory.forget(CID, turns=["k3"])
    assert again.turns == 0 and again.already_forgotten == ("k3",) and "already forgotten: k3" in again.warnings
    done = subprocess.run([str(Path(sys.executable).parent / "seem"), "forget", "--store", str(store), "--conversation", CID,
                           "--turn", "k3"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "forgot 0 turns" in done.stdout and "already forgotten: k3" in done.stderr


def test_after_a_whole_forget_naming_its_turns_again_says_already_forgotten_and_anything_else_is_unknown(tmp_path):
    from seem_dagster.memory import UnknownConversation

    store = tmp_path / "store"
    with Memory.open(store) as memory:
        memory.add(CID, FIRST)
        memory.forget(CID)
        assert memory.conversations() == []
        again = memory.forget(CID, turns=["k2", "k1"])
        assert again.turns == 0 and again.already_forgotten == ("k2", "k1") and "already forgotten: k2, k1" in again.warnings
        whole = memory.forget(CID)
        assert whole.already_forgotten == ("the whole conversation",)
        with pytest.raises(UnknownConversation):  # a turn it never held is not "already forgotten"
            memory.forget(CID, turns=["k1", "k9"])
    assert occurrences(store, needle="cello") == []


def test_a_retried_forget_by_date_speaker_or_session_says_so_and_a_speaker_never_seen_is_refused(tmp_path):
    from seem_dagster.memory import UnknownConversation

    store = tmp_path / "store"
    with Memory.open(store) as memory:
        memory.add(CID, [*FIRST, LATER, turn("k4", 11, "The tide was very low that morning.", "Ola")])
        for ask in ({"before": "2024-03-03"}, {"speaker": "Ola"}, {"session_id": "2024-03-10"}):
            first = memory.forget(CID, **ask)
            again = memory.forget(CID, **ask)
            assert first.turns >= 1 and again.turns == 0 and again.passages == first.passages  # the published memory's count
            # while turns are left, nothing of what it names is; once the last went, the conversation is gone whole
            said = "nothing to forget: no turn left matches" if memory.conversations() else "already forgotten: every turn of"
            assert again.warnings[0].startswith(said), again.warnings
        assert memory.conversations() == []
        assert "every turn of speaker Ola" in memory.forget(CID, speaker="Ola").warnings[0]
        with pytest.raises(UnknownConversation):
            memory.forget(CID, speaker="Zed")  # no forgotten turn was Zed's
    assert occurrences(store, needle="Ola") == [] and occurrences(store, needle=CANARY) == []


def test_turns_added_without_ids_after_a_forget_get_ids_of_their_own(tmp_path):
    store = tmp_path / "store"
    day = "2024-05-06T09:0{}:00"
    with Memory.open(store) as memory:
        memory.add(CID, [{"speaker": "Kim", "text": f"Morning note number {n}.", "timestamp": day.format(n)} for n in range(3)])
        assert refs(memory) == ["2024-05-06:0", "2024-05-06:1", "2024-05-06:2"]
        memory.forget(CID, turns=["2024-05-06:2"])
        memory.forget(CID, turns=["2024-05-06:0"])
        added = memory.add(CID, [{"speaker": "Kim", "text": f"Later note number {n}.", "timestamp": day.format(n + 3)} for n in range(2)])
        assert added.turns_added == 2
        got = refs(memory)
    # Neither a remembered id (2024-05-06:1) nor a forgotten one (:0, :2) is given again.
    assert got == ["2024-05-06:1", "2024-05-06:3", "2024-05-06:4"]


@pytest.mark.parametrize("turns", [5, b"k1", {"k1": 1}, [5], [None]])
def test_a_forget_naming_turns_by_anything_but_text_is_one_line(turns, tmp_path):
    store = tmp_path / "store"
    with Memory.open(store) as memory:
        memory.add(CID, FIRST)
        with pytest.raises(InvalidRequest) as err:
            memory.forget(CID, turns=turns)
        assert "\n" not in str(err.value) and ("turn" in str(err.value))
        assert refs(memory) == ["k1", "k2"]


def test_a_copied_store_reads_its_own_input_log_and_takes_adds(tmp_path):
    original, copy = tmp_path / "S", tmp_path / "S2"
    with Memory.open(original) as memory:
        memory.add(CID, FIRST)
    shutil.copytree(original, copy, symlinks=True)
    with Memory.open(original) as memory:
        memory.add(CID, [LATER])  # after the copy: S2 must never see it
    with Memory.open(copy) as memory:
        added = memory.add(CID, [turn("k9", 11, "The cello player moved out.", "Lee")])
        assert added.turns_added == 1
        assert refs(memory) == ["k1", "k2", "k9"]
    with Memory.open(original) as memory:
        assert refs(memory) == ["k1", "k2", "k3"]
    named = [(str(original) + end).encode() for end in (os.sep, '"')]
    held = [str(p) for p in copy.rglob("*") if p.is_file() and any(n in p.read_bytes() for n in named)]
    assert held == [], f"files of the copy naming the original store: {held}"
