"""Publishing a build as a whole (issue 18, item 1): the manifest, what a publish refuses, what it
keeps and removes, and stores written before manifests. Real Parquet files, no Dagster; the builds
killed at each step, through the real CLI, are in test_fault_builds.py."""

from __future__ import annotations

import json
import subprocess
import sys

import polars as pl
import pytest

from seem_dagster.store import builds, snapshot
from seem_dagster.store.manifest import manifest_path, read_manifest

CID = "c"
REQUIRED = ["passages", "facts"]


def stage(root, build, asset, frame, upstream=(), from_build=None):
    """Write ``asset`` into ``build`` as the IO manager does, made from ``upstream`` as staged in
    ``from_build`` (default: the same build)."""
    made_from = {u: snapshot.read_footer(snapshot.staged_path(root, CID, from_build or build, u))["fingerprint"] for u in upstream}
    builds.claim(root, CID, build, in_process=True)
    return snapshot.write_snapshot(snapshot.staged_path(root, CID, build, asset), frame, asset=asset, conversation_id=CID,
                                   build_id=build, upstream=made_from, stage={})


def memory(root, build, n):
    stage(root, build, "passages", pl.DataFrame({"passage_id": [f"p{i}" for i in range(n)]}))
    stage(root, build, "facts", pl.DataFrame({"fact_id": [f"t{i}" for i in range(n)]}), ["passages"])


def read(root):
    return snapshot.read_snapshot(root, CID, REQUIRED)


def test_a_build_is_invisible_until_published_then_read_whole(tmp_path):
    memory(tmp_path, "b1", 3)
    with pytest.raises(snapshot.SnapshotError, match="no snapshot of passages"):
        read(tmp_path)
    done = builds.publish(tmp_path, CID, ["b1"], REQUIRED)
    assert done.staged == ["facts", "passages"] and done.previous_build is None
    assert read(tmp_path)["facts"].height == 3
    manifest = read_manifest(tmp_path, CID)
    assert manifest["build_id"] == "b1" and set(manifest["tables"]) == {"passages", "facts"}
    assert snapshot.table_path(tmp_path, "facts", CID) == snapshot.staged_path(tmp_path, CID, "b1", "facts")
    # The next build is staged beside it; readers keep the published one until it is published.
    memory(tmp_path, "b2", 5)
    assert read(tmp_path)["facts"].height == 3
    builds.publish(tmp_path, CID, ["b2"], REQUIRED)
    assert read(tmp_path)["facts"].height == 5


def test_the_previous_build_stays_for_readers_and_older_ones_go(tmp_path):
    for n, build in enumerate(["b1", "b2", "b3"], start=1):
        memory(tmp_path, build, n)
        done = builds.publish(tmp_path, CID, [build], REQUIRED)
    assert done.previous_build == "b2" and done.removed_builds == ["b1"]
    assert sorted(p.name for p in (tmp_path / "_builds" / CID).iterdir()) == ["b2", "b3"]


def test_an_incomplete_build_is_not_published(tmp_path):
    memory(tmp_path, "b1", 3)
    builds.publish(tmp_path, CID, ["b1"], REQUIRED)
    before = manifest_path(tmp_path, CID).read_bytes()
    stage(tmp_path, "b2", "passages", pl.DataFrame({"passage_id": ["p0", "p1", "p2", "p3"]}))  # died before facts
    with pytest.raises(builds.PublishError, match="facts .* was made from another passages"):
        builds.publish(tmp_path, CID, ["b2"], REQUIRED)
    assert manifest_path(tmp_path, CID).read_bytes() == before and read(tmp_path)["passages"].height == 3
    # A first build that lacks a table has nothing to fill it in from.
    fresh = tmp_path / "fresh"
    stage(fresh, "x1", "passages", pl.DataFrame({"passage_id": ["p0"]}))
    with pytest.raises(builds.PublishError, match="without facts"):
        builds.publish(fresh, CID, ["x1"], REQUIRED)
    assert read_manifest(fresh, CID) is None


def test_a_query_result_is_kept_while_its_memory_stands_and_dropped_with_it(tmp_path):
    memory(tmp_path, "b1", 3)
    builds.publish(tmp_path, CID, ["b1"], REQUIRED, optional=["answers"])
    stage(tmp_path, "q1", "answers", pl.DataFrame({"a": [1]}), ["passages", "facts"], from_build="b1")
    done = builds.publish(tmp_path, CID, ["q1"], REQUIRED, optional=["answers"])
    assert done.carried == ["facts", "passages"] and snapshot.read_snapshot(tmp_path, CID, ["answers", "facts"])["answers"].height == 1
    memory(tmp_path, "b2", 4)  # the memory is rebuilt: the answers were made from the old one
    done = builds.publish(tmp_path, CID, ["b2"], REQUIRED, optional=["answers"])
    assert done.dropped == ["answers"] and "answers" not in read_manifest(tmp_path, CID)["tables"]
    # A query that read the old memory and finishes after the rebuild is not published over it.
    stage(tmp_path, "q2", "answers", pl.DataFrame({"a": [2]}), ["passages", "facts"], from_build="b1")
    with pytest.raises(builds.PublishError, match="made from another"):
        builds.publish(tmp_path, CID, ["q2"], REQUIRED, optional=["answers"])


def test_a_re_executed_run_publishes_the_tables_its_parent_run_wrote(tmp_path):
    stage(tmp_path, "parent", "passages", pl.DataFrame({"passage_id": ["p0", "p1"]}))
    stage(tmp_path, "child", "facts", pl.DataFrame({"fact_id": ["t0"]}), ["passages"], from_build="parent")
    done = builds.publish(tmp_path, CID, ["child", "parent"], REQUIRED)
    assert {a: e["build_id"] for a, e in done.manifest["tables"].items()} == {"facts": "child", "passages": "parent"}
    assert read(tmp_path)["passages"].height == 2


DEAD_WRITER = """
import sys
from seem_dagster.store import builds
builds.claim(sys.argv[1], "c", "dead", in_process=True)
"""


def test_unpublished_builds_of_dead_writers_are_removed_and_live_ones_kept(tmp_path):
    subprocess.run([sys.executable, "-c", DEAD_WRITER, str(tmp_path)], check=True)  # its process is gone
    (tmp_path / "_builds" / CID / "dead" / "passages.parquet").write_bytes(b"half")
    builds.claim(tmp_path, CID, "live", in_process=True)  # this process: alive
    unknown = tmp_path / "_builds" / CID / "elsewhere"  # written on another host (no record to ask): kept while recent
    unknown.mkdir(parents=True)
    (unknown / "_owner.json").write_text(json.dumps({"writer": {"host": "other", "pid": 1}, "in_process": True}))
    memory(tmp_path, "b1", 2)
    done = builds.publish(tmp_path, CID, ["b1"], REQUIRED)
    assert done.removed_builds == ["dead"]
    assert sorted(p.name for p in (tmp_path / "_builds" / CID).iterdir()) == ["b1", "elsewhere", "live"]
    # A run the Dagster instance knows is judged by its status.
    assert builds.build_is_live(tmp_path, CID, "live", run_state=lambda run_id: False) is False
    assert builds.build_is_live(tmp_path, CID, "elsewhere", run_state=lambda run_id: None) is True


def test_a_store_written_before_manifests_is_read_then_migrated_by_its_next_builds(tmp_path):
    legacy = {a: snapshot.legacy_path(tmp_path, a, CID) for a in REQUIRED}
    passages = snapshot.write_snapshot(legacy["passages"], pl.DataFrame({"passage_id": ["p0"]}), asset="passages",
                                       conversation_id=CID, build_id="old", upstream={}, stage={})
    snapshot.write_snapshot(legacy["facts"], pl.DataFrame({"fact_id": ["t0"]}), asset="facts", conversation_id=CID,
                            build_id="old", upstream={"passages": passages["fingerprint"]}, stage={})
    assert read(tmp_path)["facts"].height == 1  # read as before, with the consistency check
    memory(tmp_path, "b1", 2)
    done = builds.publish(tmp_path, CID, ["b1"], REQUIRED)
    assert done.previous_build == "before manifests" and all(p.exists() for p in legacy.values())  # kept for readers
    memory(tmp_path, "b2", 3)
    builds.publish(tmp_path, CID, ["b2"], REQUIRED)
    assert not any(p.exists() for p in legacy.values()) and read(tmp_path)["facts"].height == 3


def test_a_manifest_cannot_point_outside_the_store(tmp_path):
    memory(tmp_path, "b1", 1)
    builds.publish(tmp_path, CID, ["b1"], REQUIRED)
    path = manifest_path(tmp_path, CID)
    data = json.loads(path.read_text())
    data["tables"]["facts"]["path"] = "../../etc/passwd"
    path.write_text(json.dumps(data))
    with pytest.raises(snapshot.SnapshotError, match="outside the store"):
        read(tmp_path)


def test_a_manifest_replaced_while_it_is_read_is_read_again(tmp_path, monkeypatch):
    """s3fs raises FileExpired when a publish replaces the manifest between the reader's look-up and
    its read; the reader reads again and gets the new manifest, never an error."""
    from upath import UPath

    store = UPath(tmp_path)
    memory(tmp_path, "b1", 3)
    builds.publish(tmp_path, CID, ["b1"], REQUIRED)
    path = manifest_path(store, CID)
    real, calls = type(path).read_bytes, []

    class FileExpired(OSError):  # s3fs.utils.FileExpired, without s3fs
        pass

    def expiring_once(self):
        calls.append(self)
        if len(calls) == 1:
            raise FileExpired(16, "The remote file no longer exists")
        return real(self)

    monkeypatch.setattr(type(path), "read_bytes", expiring_once)
    assert read_manifest(store, CID)["build_id"] == "b1"
    assert len(calls) == 2
    monkeypatch.setattr(type(path), "read_bytes", lambda self: (_ for _ in ()).throw(PermissionError(13, "denied")))
    with pytest.raises(PermissionError):  # any other error is not retried
        read_manifest(store, CID)


def _commit(root, build, n_before, new_ids, commits_before=0):
    from seem_dagster.store import commits

    rows = pl.DataFrame({"passage_id": new_ids})
    cid = commits.new_id()
    builds.claim(root, CID, cid, in_process=True)
    return commits.publish_commit(root, CID, cid, build, commits_before, {"passages": (rows, [])},
                                  rows={"passages": n_before + len(new_ids)}, source=_source(new_ids[-1]), turns=len(new_ids))


def _source(fingerprint: str) -> dict:
    from seem_dagster.config import IngestConfig
    from seem_dagster.store.sources import Source

    return Source(CID, "_inputs/c.jsonl", "jsonl", fingerprint, IngestConfig()).to_json()


def test_a_build_over_appends_made_while_it_ran_keeps_them_on_its_tables(tmp_path):
    """A compaction (a build of the same settings) that started from a memory which then took append
    commits publishes with those commits carried onto its tables, so no appended turn is lost and no
    run fails because an agent wrote meanwhile; the commits it read as part of its base are not."""
    from seem_dagster.store.commits import commits_of

    memory(tmp_path, "b0", 2)
    builds.publish(tmp_path, CID, ["b0"], REQUIRED)
    _commit(tmp_path, "b0", 2, ["p2"])  # before the build starts: its input holds p2
    builds.note_base(tmp_path, CID, "compact")
    _commit(tmp_path, "b0", 3, ["p3"], commits_before=1)  # while it runs
    memory(tmp_path, "compact", 3)  # p0..p2: what it read
    done = builds.publish(tmp_path, CID, ["compact"], REQUIRED)
    manifest = read_manifest(tmp_path, CID)
    assert manifest["build_id"] == "compact" and [c["turns"] for c in commits_of(manifest)] == [1]
    assert manifest["source"]["fingerprint"] == "p3"  # the memory holds the latest append's input
    from seem_dagster.store.sources import published_source

    assert published_source(tmp_path, CID).fingerprint == "p3"
    tables, _ = snapshot.read_published(tmp_path, CID, ["passages", "facts"])
    assert tables["passages"]["passage_id"].to_list() == ["p0", "p1", "p2", "p3"]
    assert done.previous_build == "b0"


def test_a_build_of_other_settings_over_appends_is_refused(tmp_path):
    memory(tmp_path, "b0", 2)
    builds.publish(tmp_path, CID, ["b0"], REQUIRED)
    builds.note_base(tmp_path, CID, "other")
    _commit(tmp_path, "b0", 2, ["p2"])
    stage(tmp_path, "other", "passages", pl.DataFrame({"passage_id": ["p0", "p1"]}))
    builds.claim(tmp_path, CID, "other", in_process=True)
    snapshot.write_snapshot(snapshot.staged_path(tmp_path, CID, "other", "facts"), pl.DataFrame({"fact_id": ["t0"]}), asset="facts",
                            conversation_id=CID, build_id="other",
                            upstream={"passages": snapshot.read_footer(snapshot.staged_path(tmp_path, CID, "other", "passages"))["fingerprint"]},
                            stage={"extractor": "another"})
    with pytest.raises(builds.PublishError, match="turns were appended while build other ran, and its facts was made with other settings"):
        builds.publish(tmp_path, CID, ["other"], REQUIRED)
    assert read_manifest(tmp_path, CID)["build_id"] == "b0"


def test_a_build_started_before_another_was_published_is_refused_and_the_other_stays(tmp_path):
    """Two builds of one conversation that no writer lock kept apart (a sensor's run and a `seem build`,
    or two machines): the one that started from a memory since replaced publishes nothing, and says so."""
    memory(tmp_path, "b0", 1)
    builds.publish(tmp_path, CID, ["b0"], REQUIRED)
    builds.note_base(tmp_path, CID, "slow")  # both start from b0
    builds.note_base(tmp_path, CID, "fast")
    memory(tmp_path, "fast", 2)
    builds.publish(tmp_path, CID, ["fast"], REQUIRED)
    memory(tmp_path, "slow", 3)
    with pytest.raises(builds.PublishError, match=r"build fast was published while build slow ran \(it started from b0\)"):
        builds.publish(tmp_path, CID, ["slow"], REQUIRED)
    assert read_manifest(tmp_path, CID)["build_id"] == "fast" and read(tmp_path)["facts"].height == 2
    # A build that starts from the memory as it is now publishes.
    builds.note_base(tmp_path, CID, "next")
    memory(tmp_path, "next", 4)
    assert builds.publish(tmp_path, CID, ["next"], REQUIRED).previous_build == "fast"
