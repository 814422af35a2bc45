"""Issue 55's append path: an add to a current memory is published as a commit on it, in process.

What a reader sees (the base build with its commits applied) is the memory a build of the same input
makes, table for table; another process sees the commits at its next read; compaction (a build)
folds them into a fresh base; a forget of an appended turn leaves nothing of it.
"""

from __future__ import annotations

import json

import polars as pl
import pytest

from conftest import occurrences, seem_cli
from seem_dagster import Memory
from seem_dagster.pipeline.stages import MEMORY_TABLES
from seem_dagster.store.commits import KEYS, PREFIX
from seem_dagster.store.manifest import read_manifest
from seem_dagster.store.snapshot import read_published

pytestmark = pytest.mark.slow  # builds through Dagster

CID = "live"
CANARY = "vorpelline"
FIRST = [
    {"speaker": "Maya", "text": "I live in Leeds now, near the river.", "timestamp": "2024-01-10T18:00:00"},
    {"speaker": "Jon", "text": "Nice. How is your pottery class going?", "timestamp": "2024-01-10T18:01:00"},
    {"speaker": "Maya", "text": "The pottery class is great, the studio got a new kiln.", "timestamp": "2024-01-10T18:02:00"},
]
LATER = [  # one turn per add, as an agent writes them; the last two in a new session
    {"speaker": "Jon", "text": "A new kiln for the pottery class sounds great.", "timestamp": "2024-01-10T18:03:00"},
    {"speaker": "Maya", "text": f"I glazed the vase with the {CANARY} glaze from the studio.", "timestamp": "2024-01-10T18:04:00"},
    {"speaker": "Maya", "text": "I moved to York last week.", "timestamp": "2024-02-14T19:00:00"},
    {"speaker": "Jon", "text": "Good luck with the move to York and the new flat.", "timestamp": "2024-02-14T19:01:00"},
]


def sessions_of(turns):
    return ["s1" if t["timestamp"].startswith("2024-01") else "s2" for t in turns]


def by_key(tables: dict[str, pl.DataFrame]) -> dict[str, pl.DataFrame]:
    return {a: t.sort(list(KEYS[a])) for a, t in tables.items()}


def lives_in(memory) -> list[tuple]:
    props = memory.properties(CID).filter(pl.col("property") == "lives_in")
    return [(r["value"], r["valid_to"] is None) for r in props.sort("valid_from").iter_rows(named=True)]


def rebuilt(tmp_path, store) -> dict[str, pl.DataFrame]:
    """The same input (the store's input log) built whole by the build job, in another store."""
    other = Memory.open(tmp_path / "rebuilt")
    (done,) = other.add_file(str(store / "_inputs" / f"{CID}.jsonl"))
    assert done.build_id is not None
    tables, manifest = read_published(tmp_path / "rebuilt", CID, MEMORY_TABLES)
    assert not manifest.get("commits")
    other.close()
    return tables


@pytest.fixture
def appended(tmp_path, monkeypatch):
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    store = tmp_path / "store"
    memory = Memory.open(store)
    first = memory.add(CID, FIRST, session_id="s1")
    assert first.build_id is not None and first.commit is None  # a new conversation: the build job
    done = []
    for t, session in zip(LATER, sessions_of(LATER)):
        added = memory.add(CID, [t], session_id=session)
        done.append((added, [h.text for h in memory.search(CID, t["text"], k=3)]))
    yield memory, store, done
    memory.close()


def test_adds_to_a_current_memory_are_commits_that_equal_a_build_of_the_same_input(appended, tmp_path):
    memory, store, done = appended
    for (added, found), t in zip(done, LATER):
        assert added.commit is not None and added.commit.startswith(PREFIX) and added.build_id is None, added
        assert added.status == "changed" and added.turns_added == 1, added
        assert added.appended == "by step", added  # only the new turn's work, not the whole conversation's
        assert t["text"] in found  # searchable as soon as add returns
    assert [a.passages for a, _ in done] == [4, 5, 6, 7]
    manifest = read_manifest(store, CID)
    assert len(manifest["commits"]) == 4 and manifest["build_id"] == memory.build_id(CID)

    # The memory a reader sees is the one a build makes from the same input, table for table.
    merged, _ = read_published(store, CID, MEMORY_TABLES)
    full = rebuilt(tmp_path, store)
    for asset in MEMORY_TABLES:
        assert by_key(merged)[asset].equals(by_key(full)[asset]), asset
    # A later turn changed an earlier row: the move closed Leeds (its valid_to is set by a commit).
    assert lives_in(memory) == [("Leeds", False), ("York", True)]
    # The Dagster UI shows each append: an observation of the conversation's passages, with its commit.
    from dagster import AssetKey, DagsterInstance

    seen = DagsterInstance.get().fetch_observations(AssetKey("passages"), limit=20).records
    observed = {r.event_log_entry.asset_observation.metadata["commit"].value for r in seen if r.partition_key == CID}
    assert observed == {a.commit for a, _ in done}
    # A commit holds the rows it adds or changes, not the memory.
    last = manifest["commits"][-1]["tables"]
    assert last["passages"]["rows"] == 1 and "questions" not in last


def test_a_turn_the_steps_cannot_take_alone_is_appended_from_the_whole_conversation(appended, tmp_path):
    memory, store, _ = appended
    # A new speaker changes every turn's extraction input (the speakers resolve "you"): the whole
    # conversation is built in process, and the next turn is appended by step again.
    guest = memory.add(CID, [{"speaker": "Ana", "text": "Hi both, I am Ana, I live in York too.", "timestamp": "2024-02-14T19:05:00"}],
                       session_id="s2")
    assert guest.commit is not None and guest.appended.startswith("whole conversation: a new turn names a new speaker"), guest
    after = memory.add(CID, [{"speaker": "Maya", "text": "Welcome Ana, we should visit the York pottery studio.",
                              "timestamp": "2024-02-14T19:06:00"}], session_id="s2")
    assert after.commit is not None and after.appended == "by step", after
    merged, _ = read_published(store, CID, MEMORY_TABLES)
    full = rebuilt(tmp_path, store)
    for asset in MEMORY_TABLES:
        assert by_key(merged)[asset].equals(by_key(full)[asset]), asset


def test_another_process_reads_the_commits_and_a_reader_of_the_store_alone_sees_them(appended, tmp_path):
    memory, store, _ = appended
    reader = Memory.open(store)
    assert sorted(reader.index(CID).passages["text"].to_list()) == sorted(t["text"] for t in [*FIRST, *LATER])
    more = {"speaker": "Maya", "text": "The new flat in York has a balcony for my plants.", "timestamp": "2024-02-14T19:02:00"}
    memory.add(CID, [more], session_id="s2")
    found = [h.text for h in reader.search(CID, more["text"], k=3)]  # the long-lived reader applies the new commit at its next call
    assert more["text"] in found
    rows = reader.sql("SELECT count(*) AS n FROM passages", CID).frame["n"][0]
    assert rows == len(FIRST) + len(LATER) + 1
    reader.close()


def test_a_build_compacts_the_commits_into_a_fresh_base(appended, tmp_path, monkeypatch):
    memory, store, _ = appended
    before = by_key(read_published(store, CID, MEMORY_TABLES)[0])
    commit_folders = {p.name for p in (store / "_builds" / CID).iterdir() if p.name.startswith(PREFIX)}
    assert len(commit_folders) == 4
    built = seem_cli("build", "--input", str(store / "_inputs" / f"{CID}.jsonl"), "--store", str(store), "--rebuild", "--quiet")
    assert built.returncode == 0, built.stderr
    manifest = read_manifest(store, CID)
    assert not manifest.get("commits") and manifest["previous"]["commits"]  # kept for readers of the manifest before
    after = by_key(read_published(store, CID, MEMORY_TABLES)[0])
    for asset in MEMORY_TABLES:
        assert after[asset].equals(before[asset]), asset
    # An add after compaction is a commit on the new base; the publish after it retires the old commits.
    memory.add(CID, [{"speaker": "Jon", "text": "Send me a photo of the balcony.", "timestamp": "2024-02-14T19:03:00"}], session_id="s2")
    assert len(read_manifest(store, CID)["commits"]) == 1
    seem_cli("build", "--input", str(store / "_inputs" / f"{CID}.jsonl"), "--store", str(store), "--rebuild", "--quiet")
    left = {p.name for p in (store / "_builds" / CID).iterdir()}
    assert not left & commit_folders


def test_the_nightly_schedule_compacts_a_memory_that_took_appends(appended):
    from datetime import datetime

    from dagster import DagsterInstance, SkipReason, build_schedule_context

    from seem_dagster.defs.assemble import build_defs
    from seem_dagster.defs.schedules import nightly_rebuild

    memory, store, _ = appended
    instance = DagsterInstance.get()
    context = build_schedule_context(instance=instance, scheduled_execution_time=datetime(2026, 1, 2, 3), resources={"seem": memory.config})
    (request,) = list(nightly_rebuild(context))
    assert request.partition_key == CID
    job = build_defs(memory.resolved).resolve_job_def("build_memory")
    assert job.execute_in_process(instance=instance, partition_key=CID, tags=request.tags).success
    assert not read_manifest(store, CID).get("commits")
    context = build_schedule_context(instance=instance, scheduled_execution_time=datetime(2026, 1, 3, 3), resources={"seem": memory.config})
    assert isinstance(nightly_rebuild(context), SkipReason)  # compacted: nothing to do


def test_the_compaction_sensor_compacts_and_an_append_made_while_it_runs_is_carried_onto_the_fresh_base(appended, tmp_path, monkeypatch):
    """The sensor asks for one compaction per base build once the memory took store.compact_commits
    commits; an agent's add while that run builds is not lost and fails nothing: the run publishes its
    base with the add's commit on it, and the memory equals a build of the same input."""
    from dagster import DagsterInstance, SkipReason, build_sensor_context

    from seem_dagster import faults
    from seem_dagster.defs.assemble import build_defs
    from seem_dagster.defs.sensors import compaction_sensor

    memory, store, _ = appended
    instance = DagsterInstance.get()
    config = memory.config.model_copy(update={"store": memory.config.store.model_copy(update={"compact_commits": 4})})
    (request,) = compaction_sensor(build_sensor_context(instance=instance, resources={"seem": config}))
    assert request.partition_key == CID and request.run_key == f"compact:{CID}:{memory.build_id(CID)}"
    late = {"speaker": "Maya", "text": "The kiln at the York studio fired my first bowl.", "timestamp": "2024-02-14T19:10:00"}
    added = []
    point = faults.point

    def add_while_it_builds(name):
        if name == faults.table_point("passages", "after") and not added:
            added.append(None)  # (the append passes this point too, for its own tables)
            added[0] = memory.add(CID, [late], session_id="s2")  # the run has read its input already
        point(name)

    monkeypatch.setattr(faults, "point", add_while_it_builds)
    job = build_defs(memory.resolved).resolve_job_def("build_memory")
    result = job.execute_in_process(instance=instance, partition_key=CID, tags=request.tags)
    assert result.success
    assert added and added[0].commit is not None and added[0].appended == "by step"
    manifest = read_manifest(store, CID)
    assert manifest["build_id"] == result.run_id and [c["id"] for c in manifest["commits"]] == [added[0].commit]
    assert late["text"] in [h.text for h in memory.search(CID, late["text"], k=3)]
    merged, _ = read_published(store, CID, MEMORY_TABLES)
    full = rebuilt(tmp_path, store)
    for asset in MEMORY_TABLES:
        assert by_key(merged)[asset].equals(by_key(full)[asset]), asset
    assert isinstance(compaction_sensor(build_sensor_context(instance=instance, resources={"seem": config})), SkipReason)


def test_an_append_whose_commit_is_refused_is_built_by_the_build_job_and_keeps_its_turn(appended, monkeypatch):
    """Another writer published between the append's read of the manifest and its commit (a
    CommitError): nothing of the commit is published, and the add's turn, already in the log, is
    built by the build job; the next add appends again from the memory that build published."""
    from seem_dagster.store import commits

    memory, store, _ = appended
    refuse = commits.publish_commit

    def refused_once(*args, **kwargs):
        monkeypatch.setattr(commits, "publish_commit", refuse)
        raise commits.CommitError("published meanwhile (a test)")

    monkeypatch.setattr(commits, "publish_commit", refused_once)
    turn = {"speaker": "Jon", "text": "The studio in York has a bigger kiln than Leeds.", "timestamp": "2024-02-14T19:20:00"}
    added = memory.add(CID, [turn], session_id="s2")
    assert added.commit is None and added.build_id is not None and added.turns_added == 1, added
    assert not read_manifest(store, CID).get("commits")
    assert turn["text"] in [h.text for h in memory.search(CID, turn["text"], k=3)]
    after = memory.add(CID, [{"speaker": "Maya", "text": "Bigger kilns fire more bowls.", "timestamp": "2024-02-14T19:21:00"}],
                       session_id="s2")
    assert after.commit is not None and after.appended == "by step", after


def test_after_compact_after_commits_the_next_add_is_built_by_the_build_job(tmp_path, monkeypatch):
    monkeypatch.setenv("SEEM_STORE_COMPACT_AFTER", "2")
    memory = Memory.open(tmp_path / "store")
    memory.add(CID, FIRST, session_id="s1")
    kinds = [("commit" if a.commit else "build") for a in (memory.add(CID, [t], session_id=s) for t, s in zip(LATER, sessions_of(LATER)))]
    assert kinds == ["commit", "commit", "build", "commit"]
    assert len(read_manifest(tmp_path / "store", CID)["commits"]) == 1
    memory.close()


def test_with_store_append_off_every_add_is_a_build(tmp_path, monkeypatch):
    monkeypatch.setenv("SEEM_STORE_APPEND", "false")
    memory = Memory.open(tmp_path / "store")
    memory.add(CID, FIRST, session_id="s1")
    added = memory.add(CID, [LATER[0]], session_id="s1")
    assert added.build_id is not None and added.commit is None
    memory.close()


def test_forgetting_an_appended_turn_leaves_nothing_of_it(appended, tmp_path):
    memory, store, _ = appended
    assert occurrences(store, needle=CANARY)
    ref = memory.index(CID).passages.filter(pl.col("text").str.contains(CANARY))["source_ref"].to_list()
    done = memory.forget(CID, turns=ref)
    assert done.turns == 1 and done.build_id is not None
    assert occurrences(store, tmp_path / "dagster_home", needle=CANARY) == []
    assert not read_manifest(store, CID).get("commits")
    assert all(CANARY not in json.dumps(h.to_json()) for h in memory.search(CID, "What glaze did Maya use?", k=10))
    # and an add after it is a commit again, without the forgotten turn
    again = memory.add(CID, [{"speaker": "Jon", "text": "Which glaze was it?", "timestamp": "2024-02-14T19:05:00"}], session_id="s2")
    assert again.commit is not None and occurrences(store, needle=CANARY) == []


def test_two_processes_appending_to_one_conversation_both_keep_their_turns(tmp_path):
    import subprocess
    import sys
    import textwrap

    store = tmp_path / "store"
    memory = Memory.open(store)
    memory.add(CID, FIRST, session_id="s1")
    memory.close()
    script = textwrap.dedent("""
        import sys
        from seem_dagster import Memory
        who, store = sys.argv[1], sys.argv[2]
        with Memory.open(store) as memory:
            for n in range(3):
                done = memory.add("live", [{"speaker": "Jon", "text": f"{who} says thing number {n} about the kiln.",
                                            "timestamp": f"2024-03-0{n + 1}T10:00:00", "id": f"{who}-{n}"}], session_id="s3")
                print(done.commit or done.build_id, flush=True)
    """)
    writers = [subprocess.Popen([sys.executable, "-c", script, who, str(store)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for who in ("ann", "bob")]
    outputs = [w.communicate(timeout=600) for w in writers]
    assert all(w.returncode == 0 for w in writers), [o[1][-2000:] for o in outputs]
    refs = set(Memory.open(store).index(CID).passages["source_ref"].to_list())
    assert {f"{who}-{n}" for who in ("ann", "bob") for n in range(3)} <= refs
    merged, _ = read_published(store, CID, MEMORY_TABLES)
    full = rebuilt(tmp_path, store)
    for asset in MEMORY_TABLES:
        assert by_key(merged)[asset].equals(by_key(full)[asset]), asset
