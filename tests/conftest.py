import json
import sqlite3
import subprocess
import sys
import threading
import time
import typing
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = ROOT.parent / "shared" / "data"
LOCOMO_DEV = SHARED_DATA / "locomo" / "locomo_dev7.json"
LONGMEMEVAL_DEV = SHARED_DATA / "longmemeval" / "longmemeval_s_dev.json"
SAMPLE = ROOT / "data" / "sample_conversation.jsonl"
SAMPLE_QUESTIONS = ROOT / "data" / "sample_questions.jsonl"


def need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"benchmark data not found at {path} (../shared/data is only on development machines)")
    return path


@pytest.fixture
def locomo_dev() -> Path:
    return need(LOCOMO_DEV)


@pytest.fixture
def longmemeval_dev() -> Path:
    return need(LONGMEMEVAL_DEV)


def message(**overrides) -> dict:
    base = {
        "conversation_id": "c1",
        "session_id": "s1",
        "timestamp": "2024-03-02T19:05:00",
        "speaker": "Ana",
        "text": "I adopted a cat yesterday.",
    }
    base.update(overrides)
    return {k: v for k, v in base.items() if v is not ...}


def write_jsonl(path: Path, rows: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


def files_under(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


def occurrences(*roots: Path, needle: str) -> list[str]:
    """Every file under ``roots`` that holds ``needle`` (any case): Parquet decompressed (rows and footer),
    SQLite row by row and byte by byte, anything else byte by byte."""
    import pyarrow.parquet as pq

    found = []
    for root in roots:
        for path in files_under(root):
            raw = path.read_bytes()
            if needle.encode() in raw.lower():
                found.append(f"{path} (bytes)")
                continue
            if path.suffix == ".parquet":
                table = pq.read_table(path)
                text = json.dumps(table.to_pylist(), default=str) + str(table.schema.metadata)
                if needle in text.lower():
                    found.append(f"{path} (rows)")
            elif raw.startswith(b"SQLite format 3"):
                con = sqlite3.connect(path)
                try:
                    for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
                        if needle in repr(con.execute(f'SELECT * FROM "{name}"').fetchall()).lower():
                            found.append(f"{path} (table {name})")
                finally:
                    con.close()
    return found


def tiny_job():
    """A Dagster job of one op that does nothing: a real run for the instance tests to launch and judge."""
    from dagster import job, op

    @op
    def noop():
        return None

    @job
    def tiny():
        noop()

    return tiny


def tree(store=None, settings: dict | None = None):
    """The resolved configuration for a test: defaults, the store, then ``settings`` ({"fusion.threshold": 0.8})."""
    from seem_dagster.config import Layer, resolve

    values = dict(settings or {})
    if store is not None:
        values["store.root"] = str(store)
    return resolve([Layer("test", values)])


SAMPLE_CONVERSATION_ID = "priya-tomas"


def build_sample(store, settings: dict | None = None):
    """The bundled sample registered in ``store`` and built through Dagster with ``settings``; the build's outcome."""
    from seem_dagster.defs.assemble import build_defs
    from seem_dagster.defs.runner import build_conversations
    from seem_dagster.registry import register_file

    register_file(store, str(SAMPLE), "jsonl")
    (outcome,) = build_conversations(build_defs(tree(store, settings)), [SAMPLE_CONVERSATION_ID])
    assert outcome.success, outcome.error
    return outcome


def seem_cli(*args: str, timeout: int = 600, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([str(Path(sys.executable).parent / "seem"), *args], capture_output=True, text=True, timeout=timeout, **kw)


@pytest.fixture(scope="session")
def sample_store(tmp_path_factory) -> Path:
    """The bundled sample built once per test session through Dagster (`seem build`), for the readers
    over a real store (SQL, as-of queries, the MCP tools, the agent)."""
    store = tmp_path_factory.mktemp("sample-store")
    done = seem_cli("build", "--input", str(SAMPLE), "--questions", str(SAMPLE_QUESTIONS), "--store", str(store), "--quiet")
    assert done.returncode == 0, done.stderr[-3000:]
    return store


class MemoryReader(threading.Thread):
    """Reads a conversation's whole published memory as `seem query` does, over and over, and keeps what
    each read saw. Use it as a context manager: a reader left polling at interpreter exit sits in
    polars' threads and aborts or hangs the process, so it is stopped even when an assertion fails."""

    def __init__(self, store, conversation_id: str, join_timeout: float = 30):
        super().__init__(daemon=True)
        self.store, self.conversation_id, self.join_timeout = str(store), conversation_id, join_timeout
        self.sizes, self.errors, self.stopped = [], [], threading.Event()

    def run(self):
        from upath import UPath

        from seem_dagster.pipeline.stages import MEMORY_TABLES
        from seem_dagster.store import snapshot

        while not self.stopped.is_set():
            try:
                tables = snapshot.read_snapshot(UPath(self.store), self.conversation_id, MEMORY_TABLES)
                self.sizes.append(tables["passages"].height)
            except Exception as err:  # noqa: BLE001 - every failure is what a test looks for
                self.errors.append(f"{type(err).__name__}: {err}")
            time.sleep(0.05)

    def __enter__(self) -> "MemoryReader":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopped.set()
        self.join(timeout=self.join_timeout)


def other_value(annotation, default):
    """A valid value other than ``default`` for a setting of this type (the default itself where a
    choice has no other option)."""
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) is typing.Literal:
        return next((a for a in args if a != default), default)
    if isinstance(default, bool):
        return not default
    if isinstance(default, int):
        return default + 1
    if isinstance(default, float):
        return round(default / 2, 4) if default else 0.25
    if isinstance(default, tuple):
        return default[:1]
    if default is None:
        return "tokens.json" if str in args else ("user",)
    return default + "-x" if default else "x"


@pytest.fixture(scope="session")
def redis_broker():
    """Debian's redis-server on a free loopback port, one for the whole test session, as a Celery broker
    (db 0) and result backend (db 1): dagster-celery registers its task on the launching process's first
    Celery app, so every Celery build of one session must reach the same broker. Yields the two URLs."""
    import os
    import shutil
    import signal
    import socket

    server = shutil.which("redis-server")
    if server is None:
        pytest.skip("redis-server is not installed (`make redis` installs Debian's package; `make test` does it first)")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen([server, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, "redis-server exited"
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
                    sock.sendall(b"PING\r\n")
                    if sock.recv(16).startswith(b"+PONG"):
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "redis-server did not answer PING in 30 s"
            time.sleep(0.1)
        yield f"redis://127.0.0.1:{port}/0", f"redis://127.0.0.1:{port}/1"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
