"""kill -9 of a real writer at every named point of an add and of a forget (seem_dagster/faults.py),
then what docs/guarantees.md promises, checked on what the crash left on disk:

- a reader (the next command of the store) reads a whole memory: the one before the write or the one
  after it, never a mix, and never fails;
- no acknowledged turn is lost, and a retry of the killed write completes it;
- after a forget has recorded what it removes (its tombstones; for a whole conversation, its
  journal), once any later command of the store has run no file under the store or the Dagster home
  holds the forgotten text (Parquet decompressed, SQLite row by row, every other file byte by byte);
  a crash before that leaves the memory as it was, and the retry forgets;
- what a killed write leaves is tidied: at most the published build and the one before it remain.

Each case is a real process forked from a warmed one (tests/crash_zygote.py), killed by a real
SIGKILL, on a copy of a store and a Dagster home built once for the module.

`make test` runs every point of an add and of a forget, with the table points of a build sampled
(the ingest's table before and after, then each table's after). The sample reaches every state a
build leaves on disk: a table's "before" is the "after" of the table written before it, as nothing
of the store is written between two steps. SEEM_CRASH_EVERY_TABLE_POINT=1 runs both points of every
table anyway.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import occurrences
from seem_dagster import faults
from seem_dagster.pipeline.stages import MEMORY_TABLES
from seem_dagster.store.commits import PREFIX, commit_paths

pytestmark = pytest.mark.slow  # a hundred writers through Dagster

HERE = Path(__file__).resolve().parent
CID = "crash"
CANARY = "quilbrant"
KEPT = [{"speaker": "Ann", "text": "I adopted a cat named Miso last spring.", "timestamp": "2024-04-01T10:00:00", "id": "k1"},
        {"speaker": "Bob", "text": "Miso is a lovely name for a cat.", "timestamp": "2024-04-01T10:01:00", "id": "k2"}]
SECRET = {"speaker": "Ann", "text": f"My {CANARY} code for the garage is written on the fridge.", "timestamp": "2024-04-02T09:00:00",
          "id": "k3"}
LATER = {"speaker": "Bob", "text": "We should visit the lake in June.", "timestamp": "2024-04-03T09:00:00", "id": "k4"}
REPLY_TIMEOUT_S = 600


def table_points() -> list[str]:
    if os.environ.get("SEEM_CRASH_EVERY_TABLE_POINT"):
        return [faults.table_point(t, w) for t in MEMORY_TABLES for w in faults.TABLE_POINTS]
    return [faults.table_point("passages", "before"), *(faults.table_point(t, "after") for t in MEMORY_TABLES)]


ADD_POINTS = [*faults.ADD, *table_points(), *faults.PUBLISH]  # an add built by the build job (store.append off)
# An add appended to the current memory: the commit's tables (each one's "after"; it writes no other), its publish.
APPEND_POINTS = [*faults.ADD, faults.table_point("passages", "after"), faults.table_point("retrieval_index", "after"), *faults.APPEND]
BUILT = {"SEEM_STORE_APPEND": "false"}
FORGET_POINTS = [*faults.FORGET, faults.table_point("passages", "after"), faults.table_point("retrieval_index", "after"),
                 *faults.PUBLISH]
WHOLE_POINTS = ["forget.after_journal", "forget.after_tombstones", "forget.after_logs", "forget.before_dagster_scrub"]


class Zygote:
    def __init__(self, scratch: Path):
        self.proc = subprocess.Popen([sys.executable, str(HERE / "crash_zygote.py")], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=open(scratch / "zygote.log", "w"), text=True, cwd=scratch, start_new_session=True,
                                     env={**os.environ, "SEEM_CRASH_AT": ""})
        self.log = scratch / "zygote.log"
        assert "ready" in self._reply(300), self.log.read_text()[-3000:]

    def _reply(self, timeout_s: float) -> dict:
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout_s)
        if not ready:
            os.killpg(self.proc.pid, signal.SIGKILL)
            pytest.fail(f"no reply from the crash zygote in {timeout_s} s: {self.log.read_text()[-3000:]}")
        line = self.proc.stdout.readline()
        assert line, f"the crash zygote died: {self.log.read_text()[-3000:]}"
        return json.loads(line)

    def run(self, op: str, store: Path, home: Path, crash_at: str = "", env: dict | None = None, **args) -> dict:
        env = {"DAGSTER_HOME": str(home), "SEEM_CRASH_AT": crash_at, "SEEM_STORE_APPEND": "true", **(env or {})}
        request = {"op": op, "store": str(store), "conversation": CID, "env": env, **args}
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        return self._reply(REPLY_TIMEOUT_S)

    def ok(self, op: str, store: Path, home: Path, **args):
        reply = self.run(op, store, home, **args)
        assert reply["exit"] == 0, reply
        return reply["result"]["ok"]

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def dagster_home(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    return folder


@pytest.fixture(scope="module")
def zygote(tmp_path_factory):
    z = Zygote(tmp_path_factory.mktemp("zygote"))
    yield z
    z.close()


@pytest.fixture(scope="module")
def bases(zygote, tmp_path_factory):
    """Two stores built once: KEPT (for adds) and KEPT + SECRET + LATER (for forgets)."""
    root = tmp_path_factory.mktemp("bases")
    made = {}
    for name, adds in (("add", [KEPT]), ("forget", [[*KEPT, SECRET, LATER]]), ("appended", [KEPT, [SECRET], [LATER]])):
        store, home = root / name / "store", dagster_home(root / name / "home")
        for turns in adds:  # the first add of a conversation is a build; the next ones are commits on it
            zygote.ok("add", store, home, turns=turns)
        made[name] = (store, home, zygote.ok("read", store, home)["refs"])
    assert made["add"][2] == ["k1", "k2"] and made["forget"][2] == made["appended"][2] == ["k1", "k2", "k3", "k4"]
    assert len(json.loads((made["appended"][0] / "_manifests" / f"{CID}.json").read_text())["commits"]) == 2
    return made


def copy_of(bases, name: str, case: Path) -> tuple[Path, Path]:
    store, home, _ = bases[name]
    shutil.copytree(store, case / "store", symlinks=True)
    shutil.copytree(home, case / "home", symlinks=True)
    return case / "store", case / "home"


def killed(reply: dict, point: str) -> None:
    assert reply["signal"] == signal.SIGKILL, f"{point} was never reached: {reply}"


def builds_left(store: Path) -> int:
    """Builds kept under the store; each append commit kept must be one a manifest names (the
    published memory's, or the one before it, for its readers)."""
    folder = store / "_builds"
    if not folder.exists():
        return 0
    named = {Path(p).parent.name for m in (store / "_manifests").glob("*.json") for p in commit_paths(json.loads(m.read_text()))}
    kept = [b.name for conversation in folder.iterdir() for b in conversation.iterdir()]
    assert {b for b in kept if b.startswith(PREFIX)} <= named, kept
    return sum(1 for b in kept if not b.startswith(PREFIX))


@pytest.mark.parametrize(("point", "env"), [*((p, BUILT) for p in ADD_POINTS), *((p, {}) for p in APPEND_POINTS)],
                         ids=[*(f"build-{p}" for p in ADD_POINTS), *(f"append-{p}" for p in APPEND_POINTS)])
def test_an_add_killed_at_any_point(point, env, zygote, bases, tmp_path):
    store, home = copy_of(bases, "add", tmp_path)
    killed(zygote.run("add", store, home, crash_at=point, env=env, turns=[SECRET]), point)

    read = zygote.ok("read", store, home)  # a reader sees the memory before the add or after it
    assert read["refs"] in (["k1", "k2"], ["k1", "k2", "k3"]), read

    again = zygote.ok("add", store, home, env=env, turns=[SECRET])  # the retry completes the add, once
    assert again["passages"] == 3, again
    assert zygote.ok("read", store, home)["refs"] == ["k1", "k2", "k3"]
    assert builds_left(store) <= 2


@pytest.mark.parametrize("point", FORGET_POINTS)
def test_a_forget_killed_at_any_point(point, zygote, bases, tmp_path):
    store, home = copy_of(bases, "forget", tmp_path)
    assert occurrences(store, needle=CANARY)  # the canary is there to be forgotten
    killed(zygote.run("forget", store, home, crash_at=point, turns=["k3"]), point)

    read = zygote.ok("read", store, home)  # the next command of the store: it finishes the forget
    if point == "forget.after_journal":  # killed before the tombstones: as if never asked
        assert read["refs"] in (["k1", "k2", "k3", "k4"], ["k1", "k2", "k4"]), read
    else:
        assert read["refs"] == ["k1", "k2", "k4"], read
        assert occurrences(store, home, needle=CANARY) == []

    again = zygote.ok("forget", store, home, turns=["k3"])  # the retry finishes the job and says so
    assert again["turns"] in (0, 1), again
    assert zygote.ok("read", store, home)["refs"] == ["k1", "k2", "k4"]
    assert occurrences(store, home, needle=CANARY) == []
    assert builds_left(store) <= 2


@pytest.mark.parametrize("point", ["forget.after_tombstones", "forget.after_cache_purge", "forget.after_rebuild", "forget.after_retire",
                                   "publish.after_manifest"])
def test_a_forget_of_an_appended_turn_killed_at_any_point(point, zygote, bases, tmp_path):
    """The forgotten turn is in an append commit: its rebuild folds the commits, and nothing of them is left."""
    store, home = copy_of(bases, "appended", tmp_path)
    killed(zygote.run("forget", store, home, crash_at=point, turns=["k3"]), point)
    assert zygote.ok("read", store, home)["refs"] == ["k1", "k2", "k4"]
    assert occurrences(store, home, needle=CANARY) == []
    again = zygote.ok("forget", store, home, turns=["k3"])
    assert again["turns"] in (0, 1), again
    assert occurrences(store, home, needle=CANARY) == [] and builds_left(store) <= 2


@pytest.mark.parametrize("point", WHOLE_POINTS)
def test_a_whole_forget_killed_at_any_point(point, zygote, bases, tmp_path):
    store, home = copy_of(bases, "forget", tmp_path)
    killed(zygote.run("forget", store, home, crash_at=point), point)

    assert zygote.ok("read", store, home)["refs"] is None  # the next command finishes it: nothing of it is read
    assert occurrences(store, home, needle=CANARY) == [] and occurrences(store, home, needle="miso") == []
    again = zygote.ok("forget", store, home)  # asking again is not an error, and says it was done
    assert again["warnings"] == ["already forgotten: the whole conversation"], again
    assert builds_left(store) == 0


def test_the_points_a_writer_passes_are_named_in_one_place():
    """Every point the test can name exists in the code, so a renamed point fails here, not silently."""
    source = "\n".join(p.read_text() for p in (HERE.parent / "seem_dagster").rglob("*.py"))
    for point in [*faults.PUBLISH, *faults.ADD, *faults.APPEND, *faults.FORGET]:
        assert f'faults.point("{point}")' in source, point
    assert "faults.point(faults.table_point(asset," in source
