"""What adding one turn costs as an agent adds it, against the floor of that turn's own work, by memory size.

    .venv/bin/python benchmarks/append_latency.py [--sizes 250,2500] [--adds 5] [--session 10]

For each size a fresh store gets that many user turns of LongMemEval haystacks through the build
job (`Memory.add` with ``store.append`` off, in parts of at most MAX_TURNS: the memory), then one
add in a new process (``new: warm``: its imports and models, `Memory.warm(writes=True)`; ``its
add``: the add after them, which reads the memory and makes the append's state), then in this process ``--adds`` single turns, one `Memory.add` each (the
first, ``first``, makes the state the others continue from; p50 and p95 are of the others), and one
session of ``--session`` turns in one call. After
each single add a `Memory.search` for the turn's own words is timed and must rank it in the top 10
(searchable on return). The floor is `Memory.encode` of the same text in the same run: parsing and
embedding it, the work a turn needs before it is linked. Figures: p50 and p95 of the single adds, the
session add, the search after an add, and the add's ratio to the floor. The same memory then takes
``--adds`` more single turns through the build job (``store.append`` off), the baseline, in the same
process; ``commits`` says how many adds were appended.

Issue 55's goals: p50 <= 100 ms and p95 <= 300 ms into 2,500 and 25,000-turn memories, within 3x the
floor, and the 25,000-turn p50 at most 1.5x the 250-turn p50.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

from seem_dagster import Memory
from seem_dagster.memory.turns import MAX_TURNS

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "longmemeval" / "longmemeval_s_dev.json"
CID = "agent"


def user_turns(path: Path, n: int) -> list[dict]:
    """The first ``n`` user turns of the file's haystacks, one day apart per session, as `add` takes them."""
    turns, day = [], datetime(2023, 1, 1, 9)
    for question in json.loads(path.read_text(encoding="utf-8")):
        for session in question["haystack_sessions"]:
            day += timedelta(days=1)
            for m, message in enumerate(session):
                if message["role"] == "user" and message["content"].strip():
                    turns.append({"speaker": "User", "text": message["content"][:2000],
                                  "timestamp": (day + timedelta(minutes=m)).isoformat(timespec="seconds")})
                    if len(turns) == n:
                        return turns
    raise SystemExit(f"{path} holds fewer than {n} user turns")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def singles_into(memory, singles: list[dict], last: datetime, tag: str) -> dict:
    """``singles`` added one `add` each, timed with the floor and the search after each."""
    add_s, search_s, floor_s, found, commits = [], [], [], 0, 0
    for n, turn in enumerate(singles):
        turn = {**turn, "timestamp": (last + timedelta(hours=n + 1)).isoformat(timespec="seconds"), "id": f"{tag}-{n}"}
        started = time.perf_counter()
        memory.encode(CID, turn["text"])
        floor_s.append(time.perf_counter() - started)
        started = time.perf_counter()
        done = memory.add(CID, [turn])
        add_s.append(time.perf_counter() - started)
        commits += done.commit is not None
        started = time.perf_counter()
        hits = memory.search(CID, turn["text"][:300], k=10)
        search_s.append(time.perf_counter() - started)
        found += any(h.source_ref == f"{tag}-{n}" for h in hits)
    steady = add_s[1:] or add_s  # the first add of a process makes the state the next ones continue from
    return {"first_s": add_s[0], "add_p50": pct(steady, 0.5), "add_p95": pct(steady, 0.95), "floor_p50": pct(floor_s, 0.5),
            "search_p50": pct(search_s, 0.5), "found": found, "adds": len(singles), "commits": commits, "each": add_s,
            "ratio": statistics.median(a / f for a, f in zip(add_s[1:] or add_s, floor_s[1:] or floor_s))}


FRESH = """
import json, sys, time
started = time.perf_counter()
from seem_dagster import Memory
with Memory.open(sys.argv[1]) as memory:
    memory.warm(writes=True)
    warm = time.perf_counter()
    done = memory.add(sys.argv[2], [json.loads(sys.argv[3])])
    print(json.dumps({"warm_s": warm - started, "add_s": time.perf_counter() - warm, "commit": done.commit}))
"""


def fresh_add(store: str, turn: dict) -> dict:
    """One add in a new process: the imports and models (``Memory.warm(writes=True)``, what an agent
    does at start), then the add, which reads the memory and makes the append's state: what an
    agent's first message after a restart costs."""
    out = subprocess.run([sys.executable, "-c", FRESH, store, CID, json.dumps(turn)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def one_size(size: int, adds: int, session: int, data: Path, baseline: bool) -> list[dict]:
    turns = user_turns(data, size + 2 * adds + 1 + session)
    memory_turns, singles = turns[:size], turns[size:size + adds + 1]
    built, batch = turns[size + adds + 1:size + 2 * adds + 1], turns[size + 2 * adds + 1:]
    last = datetime.fromisoformat(memory_turns[-1]["timestamp"])
    rows = []
    with tempfile.TemporaryDirectory(prefix="seem-append-") as store:
        with Memory.open(store, **{"store.append": False}) as memory:  # the memory: built by the build job, in parts
            started = time.perf_counter()
            for i in range(0, size, MAX_TURNS):
                memory.add(CID, memory_turns[i:i + MAX_TURNS])
            bulk = time.perf_counter() - started
        fresh = fresh_add(store, {**singles[0], "timestamp": (last + timedelta(minutes=30)).isoformat(timespec="seconds"), "id": "fresh"})
        with Memory.open(store) as memory:
            memory.warm(writes=True)
            rows.append({"size": size, "mode": "append", "bulk_s": bulk, "fresh_s": fresh["warm_s"], "fresh_add_s": fresh["add_s"],
                         **singles_into(memory, singles[1:], last, "live")})
            stamp = last + timedelta(days=1)
            batch = [{**t, "timestamp": (stamp + timedelta(minutes=i)).isoformat(timespec="seconds")} for i, t in enumerate(batch)]
            started = time.perf_counter()
            memory.add(CID, batch)
            rows[-1]["session_s"] = time.perf_counter() - started
        if baseline:  # the same memory, each add a run of the build job (store.append off), in this process
            with Memory.open(store, **{"store.append": False}) as memory:
                later = last + timedelta(days=2)
                rows.append({"size": size, "mode": "build job", "bulk_s": bulk, "session_s": float("nan"), "fresh_s": float("nan"),
                             "fresh_add_s": float("nan"),
                             **singles_into(memory, built, later, "built")})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="250,2500", help="memory sizes in user turns, comma-separated")
    parser.add_argument("--adds", type=int, default=5, help="single-turn adds per size")
    parser.add_argument("--session", type=int, default=10, help="turns of the one session added in one call")
    parser.add_argument("--no-baseline", action="store_true", help="skip the adds through the build job")
    parser.add_argument("--data", type=Path, default=DATA)
    args = parser.parse_args()
    rows = [r for s in args.sizes.split(",") for r in one_size(int(s), args.adds, args.session, args.data, not args.no_baseline)]
    print(f"{'memory':>8} {'mode':>10} {'bulk add':>9} {'new: warm':>10} {'its add':>8} {'first':>8} {'add p50':>9} {'add p95':>9} "
          f"{'floor p50':>10} {'add/floor':>10} {'session':>9} {'search p50':>11} {'searchable':>11} {'commits':>8}")
    for r in rows:
        print(f"{r['size']:>8} {r['mode']:>10} {r['bulk_s']:>8.1f}s {r['fresh_s']:>10.2f}s {r['fresh_add_s']:>7.2f}s {r['first_s']:>7.2f}s "
              f"{r['add_p50'] * 1000:>7.0f}ms {r['add_p95'] * 1000:>7.0f}ms "
              f"{r['floor_p50'] * 1000:>8.1f}ms {r['ratio']:>9.1f}x {r['session_s']:>8.2f}s {r['search_p50'] * 1000:>9.0f}ms "
              f"{r['found']:>6}/{r['adds']} {r['commits']:>5}/{r['adds']}")
    for r in rows:
        print(f"{r['size']} turns, {r['mode']}: each add (s) " + " ".join(f"{a:.3f}" for a in r["each"]))
    appended = [r for r in rows if r["mode"] == "append"]
    for r in appended[1:]:
        print(f"append p50 at {r['size']} turns / at {appended[0]['size']}: {r['add_p50'] / appended[0]['add_p50']:.2f}x")
    for r in appended:
        base = next((b for b in rows if b["mode"] == "build job" and b["size"] == r["size"]), None)
        if base:
            print(f"at {r['size']} turns: the build job's add p50 / the append's: {base['add_p50'] / r['add_p50']:.1f}x")


if __name__ == "__main__":
    main()
