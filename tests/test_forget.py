"""Forgetting through `Memory.forget` and `seem forget`, on the real pipeline: real Dagster runs on a
persistent instance (DAGSTER_HOME), real Parquet, the real schedule, sensor and backfill runs.

The canary: a nonce word in three turns of two sessions, two of them fused into an episode with a
turn that stays, one stating where Maya lives (superseding Leeds). After the forget the word is
nowhere under the store or the Dagster home (Parquet read back decompressed, SQLite read row by row
and byte by byte), Leeds holds again, and no later build brings the turns back while the source
file still holds them.
"""

from __future__ import annotations

import json
import threading
import time
from datetime import datetime
from pathlib import Path

import polars as pl
import pytest

from conftest import MemoryReader, files_under, occurrences, seem_cli, write_jsonl

pytestmark = pytest.mark.slow  # builds through Dagster

CANARY = "zyxquorb"
CID = "maya"


def turn(ref: str, session: str, stamp: str, speaker: str, text: str) -> dict:
    return {"conversation_id": CID, "session_id": session, "timestamp": stamp, "speaker": speaker, "text": text, "id": ref}


TURNS = [
    turn("s1-1", "s1", "2024-01-10T18:00:00", "Maya", "I live in Leeds now, near the river."),
    turn("s1-2", "s1", "2024-01-10T18:01:00", "Jon", "Nice. How is your pottery class going?"),
    turn("s1-3", "s1", "2024-01-10T18:02:00", "Maya", "The pottery class is great, the studio got a new zyxquorb kiln for the class."),
    turn("s1-4", "s1", "2024-01-10T18:03:00", "Jon", "A new kiln for the pottery class sounds great."),
    turn("s1-5", "s1", "2024-01-10T18:04:00", "Maya", "My sister Ines is visiting next week."),
    turn("s2-1", "s2", "2024-02-14T19:00:00", "Jon", "Did you finish the vase in your pottery class?"),
    turn("s2-2", "s2", "2024-02-14T19:01:00", "Maya", "Yes, I glazed the vase in the pottery class with the zyxquorb glaze."),
    turn("s2-3", "s2", "2024-02-14T19:02:00", "Jon", "Send me a photo of the vase!"),
    turn("s2-3b", "s2", "2024-02-14T19:02:30", "Maya", "The pottery class teacher said my glazed vase is the best in the class."),
    turn("s2-4", "s2", "2024-02-14T19:03:00", "Maya", "I moved to Zyxquorb last week."),
    turn("s2-5", "s2", "2024-02-14T19:04:00", "Jon", "Good luck with the move and the new flat."),
]
FORGOTTEN = ["s1-3", "s2-2", "s2-4"]


@pytest.fixture
def dagster_home(tmp_path, monkeypatch) -> Path:
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    return home


@pytest.fixture
def built(tmp_path, dagster_home):
    """The canary conversation built from a file outside the store, through a persistent instance."""
    from seem_dagster import Memory

    source = write_jsonl(tmp_path / "maya.jsonl", TURNS)
    memory = Memory.open(tmp_path / "store")
    (added,) = memory.add_file(source)
    assert added.status == "new" and added.passages == len(TURNS)
    yield memory, source
    memory.close()


def episode_refs(memory) -> list[list[str]]:
    index = memory.index(CID)
    refs = index.source_refs
    return [sorted(refs[p] for p in ps) for ps in index.episodes["passage_ids"].to_list()]


def lives_in(memory) -> list[tuple]:
    props = memory.properties(CID).filter(pl.col("property") == "lives_in")
    return [(r["value"], r["valid_to"]) for r in props.sort("valid_from").iter_rows(named=True)]


def test_forgotten_turns_leave_no_trace_and_no_later_build_brings_them_back(built, tmp_path, dagster_home):
    memory, source = built
    store = tmp_path / "store"
    # The canary as built: two of its turns fused with a turn that stays, one superseding Leeds.
    assert any({"s1-3", "s2-2"} <= set(e) and "s2-3b" in e for e in episode_refs(memory))
    assert lives_in(memory) == [("Leeds", datetime(2024, 2, 5)), ("Zyxquorb", None)]
    assert occurrences(store, needle=CANARY) and occurrences(dagster_home, needle=CANARY) == []  # the UI's metadata never held it

    done = memory.forget(CID, turns=FORGOTTEN)
    assert (done.turns, done.passages, sorted(done.source_refs)) == (3, len(TURNS) - 3, FORGOTTEN)
    assert done.removed["builds"] >= 1 and done.removed["cache_rows"] > 0 and done.removed["dagster_runs"] >= 1
    assert occurrences(store, dagster_home, needle=CANARY) == []
    assert lives_in(memory) == [("Leeds", None)]  # the value the forgotten one had superseded holds again
    assert ["s2-3b"] in episode_refs(memory)  # its episode rebuilt from the turn that stays
    hits = memory.search(CID, "What glaze did Maya use on the vase?", k=20)
    assert not {h.source_ref for h in hits} & set(FORGOTTEN) and CANARY not in json.dumps([h.to_json() for h in hits]).lower()
    assert all(CANARY not in json.dumps(r, default=str).lower() for r in memory.sql("SELECT * FROM episodes", CID).frame.to_dicts())

    # The source file still holds the turns: a rebuild, the schedule, a backfill and the inbox sensor all leave them out.
    (again,) = memory.add_file(source, rebuild=True)
    assert again.status == "unchanged" and again.forgotten == 3 and again.passages == len(TURNS) - 3
    rebuilt = seem_cli("build", "--input", str(source), "--store", str(store), "--rebuild", "--quiet")
    assert rebuilt.returncode == 0 and "(unchanged; 3 forgotten turns left out)" in rebuilt.stdout
    write_jsonl(source, [*TURNS, turn("s3-1", "s3", "2024-03-01T10:00:00", "Jon", "How was the trip to the coast?")])
    _run_schedule_tick_and_backfill(memory, store)
    _run_inbox_sensor(memory, source, tmp_path)
    assert memory.index(CID).passages.height == len(TURNS) - 3 + 1
    assert occurrences(store, dagster_home, needle=CANARY) == []


def _run_schedule_tick_and_backfill(memory, store: Path) -> None:
    from dagster import DagsterInstance, build_schedule_context

    from seem_dagster.defs.assemble import build_defs
    from seem_dagster.defs.schedules import nightly_rebuild

    instance = DagsterInstance.get()
    defs = build_defs(memory.resolved)
    job = defs.resolve_job_def("build_memory")
    context = build_schedule_context(instance=instance, scheduled_execution_time=datetime(2026, 1, 2, 3),
                                     resources={"seem": memory.config})
    requests = list(nightly_rebuild(context))
    assert [r.partition_key for r in requests] == [CID]  # the source grew by a turn
    for request in requests:
        assert job.execute_in_process(instance=instance, partition_key=request.partition_key, tags=request.tags).success
    # A backfill run of the partition: the same job, asked for again.
    assert job.execute_in_process(instance=instance, partition_key=CID).success


def _run_inbox_sensor(memory, source: Path, tmp_path: Path) -> None:
    from dagster import DagsterInstance, build_sensor_context

    from seem_dagster.config import Layer
    from seem_dagster.defs.assemble import build_defs
    from seem_dagster.defs.sensors import inbox_sensor

    inbox = tmp_path / "inbox"
    inbox.mkdir()
    (inbox / "maya.jsonl").write_bytes(source.read_bytes())
    config = memory.resolved.over(Layer("test", {"store.inbox": str(inbox)}))
    instance = DagsterInstance.get()
    result = inbox_sensor(build_sensor_context(instance=instance, resources={"seem": config.config}))
    job = build_defs(config).resolve_job_def("build_memory")
    for request in result.run_requests:
        assert job.execute_in_process(instance=instance, partition_key=request.partition_key).success


def test_forget_by_session_speaker_and_date_and_the_cli_prints_what_went(built, tmp_path):
    memory, _ = built
    store = tmp_path / "store"
    done = seem_cli("forget", "--store", str(store), "--conversation", CID, "--speaker", "Jon", "--before", "2024-02-01")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("maya: forgot 2 turns (s1-2, s1-4); 9 turns remain, published as build ")
    assert "removed: logs 0, input log lines 0, cache tables" in done.stdout
    assert {h.source_ref for h in memory.search(CID, "pottery class", k=20)} & {"s1-2", "s1-4"} == set()
    session = memory.forget(CID, session_id="s2")
    assert sorted(session.source_refs) == ["s2-1", "s2-2", "s2-3", "s2-3b", "s2-4", "s2-5"] and session.passages == 3
    assert sorted(memory.index(CID).source_refs.values()) == ["s1-1", "s1-3", "s1-5"]


@pytest.mark.parametrize("args, message", [
    (["--turn", "s9-9"], "turn 's9-9' is not in conversation 'maya'"),
    (["--session", "s7"], "session 's7' is not in conversation 'maya'"),
    (["--speaker", "Zed"], "speaker 'Zed' has no turn in conversation 'maya'"),
    (["--before", "last spring"], "before 'last spring' is not an ISO date"),
    (["--turn", ""], "a turn id must be non-empty text"),
])
def test_a_bad_forget_is_one_line_exit_2_and_changes_nothing(args, message, built, tmp_path):
    store = tmp_path / "store"
    before = {p: p.read_bytes() for p in files_under(store) if not p.name.endswith(".lock")}
    done = seem_cli("forget", "--store", str(store), "--conversation", CID, *args)
    assert done.returncode == 2 and message in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert {p: p.read_bytes() for p in files_under(store) if not p.name.endswith(".lock")} == before


def test_a_forget_whose_criteria_exist_but_match_no_turn_changes_nothing_and_exits_0(built, tmp_path):
    """A retention policy run again, or a retry: nothing is left that it names. Said in one line; exit 0."""
    store = tmp_path / "store"
    before = {p: p.read_bytes() for p in files_under(store) if not p.name.endswith(".lock")}
    done = seem_cli("forget", "--store", str(store), "--conversation", CID, "--speaker", "Jon", "--before", "2023-01-01")
    assert done.returncode == 0, done.stderr
    assert "forgot 0 turns" in done.stdout and "nothing to forget: no turn left matches speaker Jon; before 2023-01-01" in done.stderr
    assert {p: p.read_bytes() for p in files_under(store) if not p.name.endswith(".lock")} == before


def test_an_unknown_conversation_is_refused(tmp_path):
    from seem_dagster import InvalidRequest, Memory, UnknownConversation

    with Memory.open(tmp_path / "store") as memory:
        with pytest.raises(UnknownConversation, match="no memory of conversation 'nobody' in this store"):
            memory.forget("nobody")
        with pytest.raises(InvalidRequest, match="conversation id is empty"):
            memory.forget("")
    assert files_under(tmp_path / "store") == []


def test_forgetting_a_whole_conversation_removes_it_and_its_runs(built, tmp_path, dagster_home):
    from dagster import DagsterInstance, RunsFilter

    memory, source = built
    store = tmp_path / "store"
    done = memory.forget(CID)
    assert done.turns == len(TURNS) and done.passages == 0 and done.build_id is None
    assert memory.conversations() == []
    assert DagsterInstance.get().get_run_records(RunsFilter(tags={"dagster/partition": CID})) == []
    # the writer's lock file stays (removing a lock file races its waiters), empty once released
    assert {p.relative_to(store).parts[0] for p in files_under(store) if not p.name.startswith(".")} <= {"_tombstones", "_locks"}
    assert all(p.stat().st_size == 0 for p in files_under(store / "_locks"))
    assert occurrences(store, dagster_home, needle="pottery") == []
    again = seem_cli("build", "--input", str(source), "--store", str(store))
    assert again.returncode == 0 and "every turn of it was forgotten (11 left out)" in again.stderr
    assert memory.conversations() == []


def test_a_reader_polling_through_a_forget_sees_whole_memories_only(built, tmp_path):
    memory, _ = built
    store = tmp_path / "store"
    seen, errors, stop = [], [], threading.Event()

    def poll():
        from seem_dagster import Memory

        with Memory.open(store) as reader:
            while not stop.is_set():
                try:
                    recall = reader.query(CID, "Where does Maya live?", k=50)
                    index = reader.index(CID)
                    seen.append((recall.build_id, len(recall.hits), index.passages.height, index.episodes["passage_ids"].list.len().sum()))
                except Exception as err:  # noqa: BLE001 - every failure is what the test looks for
                    errors.append(f"{type(err).__name__}: {err}")
                time.sleep(0.01)

    with MemoryReader(store, CID) as tables:
        thread = threading.Thread(target=poll, daemon=True)
        thread.start()
        time.sleep(0.5)
        memory.forget(CID, turns=["s2-4"])
        time.sleep(0.5)
        stop.set()
        thread.join(timeout=60)
    assert not errors and not tables.errors, (errors[:3], tables.errors[:3])
    assert set(tables.sizes) == {len(TURNS), len(TURNS) - 1}
    # Each read is one whole memory: a build's ranking always holds that build's turns, and an index's
    # episodes cover its passages exactly.
    sizes = {}
    for build, hits, _, _ in seen:
        sizes.setdefault(build, set()).add(hits)
    assert sorted(map(sorted, sizes.values())) == [[len(TURNS) - 1], [len(TURNS)]]
    assert all(total == passages for _, _, passages, total in seen)
