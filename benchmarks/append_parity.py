"""Whether a memory built by appending is the memory a build makes: a real conversation added one
session per `Memory.add` (and its last session one turn per add), then compared table by table with
a build of the same input in another store, before and after compaction.

    .venv/bin/python benchmarks/append_parity.py [--data ../shared/data/locomo/locomo_dev7.json] [--conversation conv-26]

Equal tables give equal retrieval (every method reads only the tables), so this is the recall
check of issue 55 by construction, at the size of a benchmark conversation. Prints, per table, the
rows and whether they are equal, how each add was made (by step, or the whole conversation and
why), and the seconds of the adds and of the build.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import Counter
from pathlib import Path

import polars as pl

from seem_dagster import Memory
from seem_dagster.ingest import load_input
from seem_dagster.pipeline.stages import MEMORY_TABLES
from seem_dagster.schemas import Passages
from seem_dagster.store.commits import KEYS
from seem_dagster.store.snapshot import read_published

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo_dev7.json"


def sessions_of(data: Path, conversation: str) -> list[tuple[str, list[dict]]]:
    (conv,) = load_input(str(data), conversations=[conversation])
    out: dict[str, list[dict]] = {}
    for row in conv.passages.sort(Passages.session_index, Passages.turn_index).iter_rows(named=True):
        out.setdefault(row[Passages.session_id], []).append({"speaker": row[Passages.speaker], "text": row[Passages.text],
                                                             "timestamp": row[Passages.timestamp].isoformat(), "id": row[Passages.source_ref]})
    return list(out.items())


def compare(store: str, other: str, cid: str) -> dict[str, tuple[int, bool, int]]:
    """Per table: rows, whether equal, and how many rows only one side has as they are."""
    mine, _ = read_published(store, cid, MEMORY_TABLES)
    theirs, _ = read_published(other, cid, MEMORY_TABLES)
    out = {}
    for a in MEMORY_TABLES:
        equal = mine[a].sort(list(KEYS[a])).equals(theirs[a].sort(list(KEYS[a])))
        differ = 0 if equal else (mine[a].join(theirs[a], on=mine[a].columns, how="anti", nulls_equal=True).height
                                  + theirs[a].join(mine[a], on=mine[a].columns, how="anti", nulls_equal=True).height)
        out[a] = (mine[a].height, equal, differ)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--conversation", default="conv-26")
    args = parser.parse_args()
    sessions = sessions_of(args.data, args.conversation)
    cid = "appended"
    with tempfile.TemporaryDirectory(prefix="seem-parity-") as root:
        store, other = f"{root}/appended", f"{root}/built"
        how: Counter = Counter()
        started = time.perf_counter()
        with Memory.open(store) as memory:
            first, *rest = sessions
            memory.add(cid, first[1], session_id=first[0])  # the first add is a build (no memory yet)
            for session_id, turns in rest[:-1]:
                how[memory.add(cid, turns, session_id=session_id).appended] += 1
            last_id, last = rest[-1]
            for turn in last:
                how[memory.add(cid, [turn], session_id=last_id).appended] += 1
        adds_s = time.perf_counter() - started
        started = time.perf_counter()
        with Memory.open(other) as built:
            built.add_file(f"{store}/_inputs/{cid}.jsonl")
        build_s = time.perf_counter() - started
        before = compare(store, other, cid)
        with Memory.open(store) as memory:
            memory.add_file(f"{store}/_inputs/{cid}.jsonl", rebuild=True)  # compaction
        after = compare(store, other, cid)
    turns = sum(len(t) for _, t in sessions)
    print(f"{args.conversation}: {turns} turns in {len(sessions)} sessions; {len(sessions) - 2} sessions appended whole, "
          f"then {len(last)} turns one add each ({adds_s:.1f} s of adds, the first a build); a build of the same input {build_s:.1f} s")
    for mode, n in how.most_common():
        print(f"  {n:>4} adds {mode}")
    print(f"{'table':>16} {'rows':>7} {'equal before compaction':>24} {'rows that differ':>17} {'after':>6} {'differ':>7}")
    for asset in MEMORY_TABLES:
        print(f"{asset:>16} {before[asset][0]:>7} {str(before[asset][1]):>24} {before[asset][2]:>17} "
              f"{str(after[asset][1]):>6} {after[asset][2]:>7}")
    differ = [a for a in MEMORY_TABLES if not (before[a][1] and after[a][1])]
    print("every table equal before and after compaction" if not differ else f"differ: {', '.join(differ)}")


if __name__ == "__main__":
    pl.Config.set_tbl_rows(5)
    main()
