"""The snapshot store on S3: a real S3-compatible server (moto's server mode) on loopback, started by
this module and stopped after. `seem build`, `seem query`, `seem sql` and `seem eval` with
``--store s3://bucket/prefix``; a reader polling the memory while rebuilds are published and while one
is killed half-way; the manifest goes up as one whole-object PUT; the credentials, read from the
environment only, appear in no output and no object.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import SAMPLE, SAMPLE_QUESTIONS, MemoryReader
from seem_dagster.evaluation.sample import write_sample_as_locomo
from seem_dagster.pipeline.stages import MEMORY_TABLES
from seem_dagster.store.manifest import read_manifest

pytest.importorskip("moto.server", reason="moto[server] is in the dev extra: pip install -e '.[dev]'")
pytest.importorskip("s3fs", reason="s3fs is in the dev extra: pip install -e '.[dev]'")

pytestmark = pytest.mark.slow  # subprocess builds through Dagster against a real server

CID = "priya-tomas"
BUCKET = "seem-memories"
SEEM = str(Path(sys.executable).parent / "seem")
SECRET = "seem-test-secret-Zq81xV"  # the server accepts any key; it must show up nowhere
LINES = SAMPLE.read_text().splitlines()
EARLY = [line for line in LINES if '"session_id": "s4"' not in line]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Requests(logging.Handler):
    """The server's request log (werkzeug's access lines): method and path of every request."""

    LINE = re.compile(r'"(GET|PUT|POST|HEAD|DELETE) (\S+) HTTP')

    def __init__(self):
        super().__init__()
        self.seen: list[tuple[str, str]] = []

    def emit(self, record):
        match = self.LINE.search(record.getMessage())
        if match:
            self.seen.append((match.group(1), match.group(2)))


@pytest.fixture(scope="module")
def s3():
    from moto.server import ThreadedMotoServer

    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    requests = Requests()
    logger = logging.getLogger("werkzeug")
    logger.addHandler(requests)
    logger.setLevel(logging.INFO)
    env = {"AWS_ACCESS_KEY_ID": "seem-test-key", "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
           "AWS_DEFAULT_REGION": "us-east-1"}
    with pytest.MonkeyPatch.context() as mp:
        for key, value in env.items():
            mp.setenv(key, value)
        mp.delenv("DAGSTER_HOME", raising=False)
        import boto3

        client = boto3.client("s3")
        client.create_bucket(Bucket=BUCKET)
        try:
            yield client, requests
        finally:
            logger.removeHandler(requests)
            server.stop()


def seem(*args, timeout=900) -> subprocess.CompletedProcess:
    done = subprocess.run([SEEM, *args], capture_output=True, text=True, timeout=timeout)
    assert SECRET not in done.stdout + done.stderr
    return done


def keys(client, prefix: str) -> list[str]:
    """Every object under ``prefix``, listed by the server itself (no client-side cache)."""
    out, token = [], None
    while True:
        page = client.list_objects_v2(Bucket=BUCKET, Prefix=prefix, **({"ContinuationToken": token} if token else {}))
        out += [o["Key"] for o in page.get("Contents", [])]
        if not page.get("IsTruncated"):
            return out
        token = page["NextContinuationToken"]


def no_secret_in_the_bucket(client) -> None:
    for key in keys(client, ""):
        assert SECRET.encode() not in client.get_object(Bucket=BUCKET, Key=key)["Body"].read(), key


def test_build_query_sql_and_eval_on_s3(s3, tmp_path):
    client, requests = s3
    store = f"s3://{BUCKET}/team/memories"
    built = seem("build", "--input", str(SAMPLE), "--questions", str(SAMPLE_QUESTIONS), "--store", store, "--quiet")
    assert built.returncode == 0, built.stderr[-3000:]
    assert f"{CID}: 48 passages (new)" in built.stdout and f"store: {store}" in built.stdout
    manifest = json.loads(client.get_object(Bucket=BUCKET, Key=f"team/memories/_manifests/{CID}.json")["Body"].read())
    stored = set(keys(client, f"team/memories/_builds/{CID}/{manifest['build_id']}/"))
    assert {f"team/memories/{entry['path']}" for entry in manifest["tables"].values()} <= stored
    assert set(MEMORY_TABLES) <= set(manifest["tables"])
    # The manifest went up whole, in one PUT (no multipart upload), once per publish.
    manifest_requests = [(m, p) for m, p in requests.seen if f"/_manifests/{CID}.json" in p]
    assert [m for m, _ in manifest_requests if m in ("PUT", "POST")] == ["PUT"], manifest_requests
    assert not [p for m, p in requests.seen if "uploads" in p or "uploadId" in p]

    asked = seem("query", "--store", store, "--conversation", CID, "--json", "Where does Priya work?")
    assert asked.returncode == 0, asked.stderr[-3000:]
    answer = json.loads(asked.stdout)
    assert "Corner Books" in json.dumps(answer)

    counted = seem("sql", "--store", store, "--conversation", CID, "--format", "csv", "SELECT count(*) AS n FROM passages")
    assert counted.returncode == 0, counted.stderr[-3000:]
    assert counted.stdout.split() == ["n", "48"]
    listed = seem("sql", "--store", store, "--format", "csv", "SELECT count(DISTINCT conversation_id) AS c FROM passages")
    assert listed.returncode == 0, listed.stderr[-3000:]  # every built conversation of the store: found by listing it
    assert listed.stdout.split() == ["c", "1"]

    data, out = write_sample_as_locomo(tmp_path / "locomo_sample.json"), tmp_path / "eval"
    evaluated = seem("eval", "locomo", "--data", str(data), "--out", str(out), "--store", f"s3://{BUCKET}/eval", "--quiet",
                     "--methods", "seem,bm25")
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    results = json.loads((out / "results.json").read_text())
    assert results["questions"] == 12 and results["methods"]["seem"]["recall@10"]["overall"] > 0.9
    assert keys(client, "eval/_eval/")  # the build record sits in the object store too
    again = seem("eval", "locomo", "--data", str(data), "--out", str(out), "--store", f"s3://{BUCKET}/eval", "--quiet",
                 "--methods", "seem,bm25")
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads((out / "results.json").read_text())["timing"]["conversations_reused"] == 1
    no_secret_in_the_bucket(client)


def test_a_reader_sees_whole_memories_while_s3_rebuilds_publish_and_one_is_killed(s3, tmp_path):
    client, _ = s3
    prefix = "rebuilds"
    store, chat = f"s3://{BUCKET}/{prefix}", tmp_path / "chat.jsonl"
    chat.write_text("\n".join(EARLY) + "\n")
    first = seem("build", "--input", str(chat), "--store", store, "--quiet")
    assert first.returncode == 0, first.stderr[-3000:]
    from upath import UPath

    old = read_manifest(UPath(store), CID)
    with MemoryReader(store, CID, join_timeout=60) as reader:
        # A rebuild with one more session, killed with SIGKILL once it has written its first tables.
        chat.write_text("\n".join(LINES) + "\n")
        builds = f"{prefix}/_builds/{CID}/"
        proc = subprocess.Popen([SEEM, "build", "--input", str(chat), "--store", store, "--quiet"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 600
            while not any(k.endswith("/event_frames.parquet") and f"/{old['build_id']}/" not in k for k in keys(client, builds)):
                assert proc.poll() is None and time.monotonic() < deadline, "the build ended before it wrote event_frames"
                time.sleep(0.05)
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert read_manifest(UPath(store), CID) == old  # the killed build published nothing
        killed = {k.split("/")[3] for k in keys(client, builds)} - {old["build_id"]}
        assert len(killed) == 1
        assert reader.errors == [] and reader.sizes and reader.sizes[-1] == len(EARLY)
        # The next build publishes the new memory while the reader goes on, and removes the killed build.
        again = seem("build", "--input", str(chat), "--store", store, "--quiet")
        assert again.returncode == 0, again.stderr[-3000:]
        assert f"{CID}: {len(LINES)} passages (changed)" in again.stdout
        time.sleep(1.0)
    assert reader.errors == [], reader.errors[:3]
    assert set(reader.sizes) == {len(EARLY), len(LINES)}
    assert reader.sizes == sorted(reader.sizes)  # the old memory until the new one was whole, then never back
    new = read_manifest(UPath(store), CID)
    assert {k.split("/")[3] for k in keys(client, builds)} == {new["build_id"], old["build_id"]}  # killed one gone
    asked = seem("query", "--store", store, "--conversation", CID, "--json", "Where does Priya work?")
    assert asked.returncode == 0, asked.stderr[-3000:]
    no_secret_in_the_bucket(client)


def test_credentials_come_from_the_environment_only(s3):
    """Without them the build fails in one line naming no secret (no key file, no config setting)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_ACCESS") and not k.startswith("AWS_SECRET")}
    env.update({"AWS_SHARED_CREDENTIALS_FILE": "/nonexistent", "AWS_CONFIG_FILE": "/nonexistent", "AWS_EC2_METADATA_DISABLED": "true"})
    done = subprocess.run([SEEM, "build", "--input", str(SAMPLE), "--store", f"s3://{BUCKET}/nocreds", "--quiet"],
                          capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [done.stderr.strip()]  # one line, no traceback
    assert "NoCredentialsError" in done.stderr and "AWS_ACCESS_KEY_ID" in done.stderr
    assert SECRET not in done.stdout + done.stderr


def test_the_inbox_sensor_registers_into_an_s3_store(s3, tmp_path):
    """The sensor's store is the tree's `store.root`: an s3:// root gets the registrations (the inbox
    itself is a folder the code location watches)."""
    from dagster import DagsterInstance, build_sensor_context

    from conftest import message, tree, write_jsonl
    from seem_dagster.defs.sensors import inbox_sensor
    from seem_dagster.store.sources import pending_path

    client, _ = s3
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    write_jsonl(inbox / "chats.jsonl", [message(conversation_id="alice"), message(conversation_id="bob", text="I started a new job.")])
    settings = tree(f"s3://{BUCKET}/sensed", {"store.inbox": str(inbox)}).config
    result = inbox_sensor(build_sensor_context(instance=DagsterInstance.ephemeral(), resources={"seem": settings}))
    assert sorted(r.partition_key for r in result.run_requests) == ["alice", "bob"]
    from upath import UPath

    for cid in ("alice", "bob"):
        key = pending_path(UPath(f"s3://{BUCKET}/sensed"), cid).path.split("/", 1)[1]
        assert key in keys(client, "sensed/"), key


def test_forget_on_s3_leaves_no_object_holding_the_text(s3):
    """The same forget as on a local store: the rebuilt memory, the older build removed, the caches
    pruned, the input log rewritten, each in whole-object writes; no object holds the text after."""
    import io

    import pyarrow.parquet as pq

    from seem_dagster import Memory

    client, _ = s3
    canary = "quilbrant"
    said = [{"speaker": "Ana", "text": "I moved to Porto in May.", "timestamp": "2024-05-02T10:00:00", "id": "a1"},
            {"speaker": "Ben", "text": f"Did you find the {canary} bakery there?", "timestamp": "2024-05-02T10:01:00", "id": "a2"},
            {"speaker": "Ana", "text": f"Yes, the {canary} bakery is next to my flat.", "timestamp": "2024-05-09T09:00:00", "id": "a3"},
            {"speaker": "Ben", "text": "Lucky you, fresh bread every day.", "timestamp": "2024-05-09T09:01:00", "id": "a4"}]

    def holding() -> list[str]:
        found = []
        for key in keys(client, "forget/"):
            body = client.get_object(Bucket=BUCKET, Key=key)["Body"].read()
            text = body.lower().decode("utf-8", "replace")
            if key.endswith(".parquet"):
                table = pq.read_table(io.BytesIO(body))
                text += json.dumps(table.to_pylist(), default=str).lower() + str(table.schema.metadata).lower()
            if canary in text:
                found.append(key)
        return found

    with Memory.open(f"s3://{BUCKET}/forget") as memory:
        memory.add("ana", said)
        assert holding()
        done = memory.forget("ana", turns=["a2", "a3"])
        assert done.passages == 2 and done.removed["builds"] >= 1
        assert {h.source_ref for h in memory.search("ana", "Which bakery is near Ana's flat?", k=5)} == {"a1", "a4"}
    assert holding() == []
    no_secret_in_the_bucket(client)


def test_of_two_publishes_racing_on_s3_the_second_is_refused_not_silent(s3):
    """Object stores have no lock: the manifest's PUT is conditional on the version the publish read
    (If-Match; If-None-Match for a first publish), so a publish that lost the race is told."""
    from seem_dagster.store.manifest import MISSING, LostRace, manifest_version, read_manifest, write_manifest

    root = f"s3://{BUCKET}/race"
    assert manifest_version(root, "c") == MISSING
    write_manifest(root, "c", {"format": 1, "build_id": "first", "tables": {}}, expect=MISSING)
    with pytest.raises(LostRace, match="another build published"):  # a second first publish
        write_manifest(root, "c", {"format": 1, "build_id": "other", "tables": {}}, expect=MISSING)
    seen = manifest_version(root, "c")
    write_manifest(root, "c", {"format": 1, "build_id": "second", "tables": {}}, expect=seen)
    with pytest.raises(LostRace):  # a publish that read the manifest before "second" replaced it
        write_manifest(root, "c", {"format": 1, "build_id": "late", "tables": {}}, expect=seen)
    assert read_manifest(root, "c")["build_id"] == "second"
