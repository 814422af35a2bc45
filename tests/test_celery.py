"""A real Celery run: Debian's redis-server on loopback as the broker (conftest's ``redis_broker``), two
dagster-celery worker processes loading the project's definitions, three conversations built through them; the memory
equals the in-process build of the same input, table by table. Everything started here is stopped here.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from dagster import DagsterInstance

from conftest import SAMPLE, tree
from seem_dagster.defs.assemble import build_defs
from seem_dagster.defs.runner import build_conversations
from seem_dagster.pipeline.stages import MEMORY_TABLES
from seem_dagster.registry import register_file
from seem_dagster.store import snapshot

pytest.importorskip("dagster_celery", reason="dagster-celery is in the dev extra: pip install -e '.[dev]'")
REDIS = shutil.which("redis-server")
pytestmark = [
    pytest.mark.slow,
    # dagster-celery registers its task on the launcher's app once per run; Celery warns on the repeats.
    pytest.mark.filterwarnings("ignore:Task name 'execute_plan' is already registered"),
    pytest.mark.skipif(REDIS is None, reason="redis-server is not installed (`make redis` installs Debian's package; "
                                             "`make test` does it first)"),
]

BIN = Path(sys.executable).parent
# Three conversations from the bundled sample, one session each (11 to 13 turns: the test stays short).
CONVERSATIONS = {"sample-s1": ("s1",), "sample-s2": ("s2",), "sample-s3": ("s3",)}


def _write_input(path: Path) -> Path:
    rows = [json.loads(line) for line in SAMPLE.read_text().splitlines() if line.strip()]
    out = [{**row, "conversation_id": cid} for cid, sessions in CONVERSATIONS.items() for row in rows if row["session_id"] in sessions]
    path.write_text("".join(json.dumps(r) + "\n" for r in out))
    return path


def _stop(proc: subprocess.Popen) -> None:
    """Stop a process and everything it started (it leads its own session)."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        except ProcessLookupError:
            pass


def _wait_for_workers(app_config: Path, env: dict, names: list[str], procs: list[subprocess.Popen]) -> None:
    """Until every worker answers the broker's ping."""
    code = ("import sys; from dagster_celery.cli import get_app; "
            "r = get_app(sys.argv[1]).control.ping(timeout=2) or []; print(' '.join(k for d in r for k in d))")
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        for proc in procs:
            assert proc.poll() is None, "a Celery worker exited"
        done = subprocess.run([sys.executable, "-c", code, str(app_config)], capture_output=True, text=True, env=env, timeout=60)
        if all(any(answer.startswith(name + "@") for answer in done.stdout.split()) for name in names):
            return
        time.sleep(1)
    raise AssertionError(f"the Celery workers did not answer in 180 s: {done.stdout} {done.stderr[-2000:]}")


def _memory(store: Path) -> dict:
    return {cid: snapshot.read_snapshot(store, cid, MEMORY_TABLES) for cid in CONVERSATIONS}


def test_three_conversations_built_by_two_celery_workers_equal_the_in_process_build(redis_broker, tmp_path, monkeypatch):
    done = build_on_celery(redis_broker, tmp_path, monkeypatch)
    print(f"\nthree conversations: in process {done['in_process_s']:.1f} s, on two Celery workers {done['celery_s']:.1f} s")


def build_on_celery(redis_broker: tuple[str, str], tmp_path: Path, monkeypatch, dagster_yaml: str = "telemetry:\n  enabled: false\n") -> dict:
    """The three conversations built in process (the reference) and on two Celery workers (broker and
    result backend: ``redis_broker``, conftest's) through the instance ``dagster_yaml`` describes
    (DAGSTER_HOME; also the PostgreSQL test's); asserts every step ran on a worker and both memories
    are equal. Returns the timings and the Celery runs' ids."""
    chat = _write_input(tmp_path / "chats.jsonl")
    reference, store = tmp_path / "in-process", tmp_path / "celery"

    # The same input in process: the reference.
    register_file(str(reference), str(chat), "jsonl")
    started = time.perf_counter()
    for outcome in build_conversations(build_defs(tree(reference)), list(CONVERSATIONS), instance=DagsterInstance.ephemeral()):
        assert outcome.success, outcome.error
    in_process_s = time.perf_counter() - started

    broker, backend = redis_broker
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(dagster_yaml)
    app_config = tmp_path / "celery.yaml"
    app_config.write_text(json.dumps({"execution": {"config": {"broker": broker, "backend": backend}}}))
    settings = {"SEEM_EXECUTION_EXECUTOR": "celery", "SEEM_EXECUTION_CELERY_BROKER": broker, "SEEM_EXECUTION_CELERY_BACKEND": backend,
                "SEEM_STORE": str(store), "DAGSTER_HOME": str(home)}
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("SEEM_")}, **settings}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"  # dagster-celery starts `celery` from the PATH
    for key, value in settings.items():
        monkeypatch.setenv(key, value)
    # The instance's storage (its SQLite files, its PostgreSQL tables) is created here, once: workers starting
    # together would race to create it.
    DagsterInstance.get().dispose()
    procs: list[subprocess.Popen] = []
    try:
        names = ["seem-w1", "seem-w2"]
        for name in names:
            # One process each (the solo pool): a worker runs one step at a time, its models loaded once.
            procs.append(subprocess.Popen(
                [str(BIN / "dagster-celery"), "worker", "start", "-A", "dagster_celery.app", "-y", str(app_config), "-n", name,
                 "-l", "WARNING", "--", "--pool=solo"],
                env=env, cwd=tmp_path, stdout=open(tmp_path / f"{name}.log", "w"), stderr=subprocess.STDOUT, start_new_session=True))
        _wait_for_workers(app_config, env, names, procs)

        resolved = tree(store, {"execution.executor": "celery", "execution.celery_broker": broker, "execution.celery_backend": backend})
        register_file(str(store), str(chat), "jsonl")
        with DagsterInstance.get() as instance:
            started = time.perf_counter()
            outcomes = build_conversations(build_defs(resolved), list(CONVERSATIONS), instance=instance, config=resolved)
            celery_s = time.perf_counter() - started
            assert [o.error for o in outcomes] == [None] * 3, [Path(o.log_path).read_text()[-3000:] for o in outcomes if o.log_path]
            # Every step ran in a Celery worker, and both workers took steps.
            hosts = set()
            for outcome in outcomes:
                for entry in instance.all_logs(outcome.run_id):
                    event = entry.dagster_event
                    if event and event.event_type_value == "ENGINE_EVENT" and "in celery worker" in (entry.message or ""):
                        hosts.add(event.engine_event_data.metadata["Celery worker"].value.split("@")[0])
            assert hosts == set(names)
    finally:
        for proc in reversed(procs):
            _stop(proc)
    for proc in procs:
        assert proc.poll() is not None

    celery, expected = _memory(store), _memory(reference)
    for cid in CONVERSATIONS:
        for table in MEMORY_TABLES:
            assert celery[cid][table].equals(expected[cid][table]), (cid, table)
    return {"in_process_s": in_process_s, "celery_s": celery_s, "run_ids": [o.run_id for o in outcomes]}
