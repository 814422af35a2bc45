"""What adding one turn costs as an agent adds it, against the floor of that turn's own work, by memory size.

    .venv/bin/python benchmarks/append_latency.py [--sizes 250,2500] [--adds 5] [--session 10]

For each size a fresh store gets that many user turns of LongMemEval haystacks in one bulk
`Memory.add` (the memory), then ``--adds`` single turns, one `Memory.add` each, and one session of
``--session`` turns in one call, all in this process (its models are warm after the bulk add). After
each single add a `Memory.search` for the turn's own words is timed and must rank it in the top 10
(searchable on return). The floor is `Memory.encode` of the same text in the same run: parsing and
embedding it, the work a turn needs before it is linked. Figures: p50 and p95 of the single adds, the
session add, the search after an add, and the add's ratio to the floor.

Issue 55's goals: p50 <= 100 ms and p95 <= 300 ms into 2,500 and 25,000-turn memories, within 3x the
floor, and the 25,000-turn p50 at most 1.5x the 250-turn p50.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

from seem_dagster import Memory

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


def one_size(size: int, adds: int, session: int, data: Path) -> dict:
    turns = user_turns(data, size + adds + session)
    memory_turns, singles, batch = turns[:size], turns[size:size + adds], turns[size + adds:]
    last = datetime.fromisoformat(memory_turns[-1]["timestamp"])
    with tempfile.TemporaryDirectory(prefix="seem-append-") as store, Memory.open(store) as memory:
        started = time.perf_counter()
        memory.add(CID, memory_turns)
        bulk = time.perf_counter() - started
        add_s, search_s, floor_s, found = [], [], [], 0
        for n, turn in enumerate(singles):
            turn = {**turn, "timestamp": (last + timedelta(hours=n + 1)).isoformat(timespec="seconds"), "id": f"live-{n}"}
            started = time.perf_counter()
            memory.encode(CID, turn["text"])
            floor_s.append(time.perf_counter() - started)
            started = time.perf_counter()
            memory.add(CID, [turn])
            add_s.append(time.perf_counter() - started)
            started = time.perf_counter()
            hits = memory.search(CID, turn["text"][:300], k=10)
            search_s.append(time.perf_counter() - started)
            found += any(h.source_ref == f"live-{n}" for h in hits)
        stamp = last + timedelta(days=1)
        batch = [{**t, "timestamp": (stamp + timedelta(minutes=i)).isoformat(timespec="seconds")} for i, t in enumerate(batch)]
        started = time.perf_counter()
        memory.add(CID, batch)
        session_s = time.perf_counter() - started
    return {"size": size, "bulk_s": bulk, "add_p50": pct(add_s, 0.5), "add_p95": pct(add_s, 0.95), "floor_p50": pct(floor_s, 0.5),
            "session_s": session_s, "search_p50": pct(search_s, 0.5), "found": found, "adds": len(singles),
            "ratio": statistics.median(a / f for a, f in zip(add_s, floor_s))}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="250,2500", help="memory sizes in user turns, comma-separated")
    parser.add_argument("--adds", type=int, default=5, help="single-turn adds per size")
    parser.add_argument("--session", type=int, default=10, help="turns of the one session added in one call")
    parser.add_argument("--data", type=Path, default=DATA)
    args = parser.parse_args()
    rows = [one_size(int(s), args.adds, args.session, args.data) for s in args.sizes.split(",")]
    print(f"{'memory':>8} {'bulk add':>9} {'add p50':>9} {'add p95':>9} {'floor p50':>10} {'add/floor':>10} "
          f"{'session':>9} {'search p50':>11} {'searchable':>11}")
    for r in rows:
        print(f"{r['size']:>8} {r['bulk_s']:>8.1f}s {r['add_p50'] * 1000:>7.0f}ms {r['add_p95'] * 1000:>7.0f}ms "
              f"{r['floor_p50'] * 1000:>8.1f}ms {r['ratio']:>9.0f}x {r['session_s']:>8.2f}s {r['search_p50'] * 1000:>9.0f}ms "
              f"{r['found']:>6}/{r['adds']}")
    first = rows[0]
    for r in rows[1:]:
        print(f"add p50 at {r['size']} turns / at {first['size']}: {r['add_p50'] / first['add_p50']:.2f}x")


if __name__ == "__main__":
    main()
