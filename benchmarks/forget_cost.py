"""What forgetting costs against a full build of the same conversation, in one process.

    .venv/bin/python benchmarks/forget_cost.py [--data PATH] [--conversation ID] [--repeat N] [--no-dagster-home]

For each repeat, into a fresh store and a fresh Dagster instance (DAGSTER_HOME, as `dagster dev`
and the schedule use: the forget deletes the conversation's runs from it and vacuums its SQLite
files), through `Memory` as a user runs it:

- full: the conversation built from scratch (models loaded beforehand, so no figure pays for loading them);
- one turn: `forget(turns=[...])` of a turn from the middle of the conversation;
- one session: `forget(session_id=...)` of a session from the middle of what is left.

Each forget rebuilds the memory without the turns, publishes it, retires the older builds, prunes
the caches to what the memory asks for and sweeps logs and runs: everything `Memory.forget` does.
It prints each figure's median over the repeats and its ratio to the full build of the same run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOCOMO_DEV = ROOT.parent / "shared" / "data" / "locomo" / "locomo_dev7.json"


def one_run(data: Path, conversation: str, dagster_home: bool) -> dict:
    from seem_dagster import Memory

    with tempfile.TemporaryDirectory(prefix="seem-forget-") as tmp:
        if dagster_home:
            home = Path(tmp) / "dagster_home"
            home.mkdir()
            (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
            os.environ["DAGSTER_HOME"] = str(home)
        try:
            with Memory.open(Path(tmp) / "store") as memory:
                started = time.perf_counter()
                (added,) = memory.add_file(data, "locomo", conversations=[conversation])
                full = time.perf_counter() - started
                passages = memory.index(conversation).passages.sort("session_index", "turn_index")
                middle = passages.row(passages.height // 2, named=True)
                started = time.perf_counter()
                turn = memory.forget(conversation, turns=[middle["source_ref"]])
                one_turn = time.perf_counter() - started
                sessions = memory.index(conversation).passages["session_id"].unique(maintain_order=True).to_list()
                started = time.perf_counter()
                session = memory.forget(conversation, session_id=sessions[len(sessions) // 2])
                one_session = time.perf_counter() - started
        finally:
            os.environ.pop("DAGSTER_HOME", None)
    return {"passages": added.passages, "full": full, "turn": one_turn, "session": one_session, "session_turns": session.turns,
            "turn_removed": turn.removed, "session_removed": session.removed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=LOCOMO_DEV, help="a LoCoMo JSON file (default: the dev file)")
    parser.add_argument("--conversation", default="conv-41", help="the conversation to build and forget in")
    parser.add_argument("--repeat", type=int, default=3, help="runs; each figure is the median")
    parser.add_argument("--no-dagster-home", action="store_true", help="build on in-memory instances (nothing of Dagster to scrub)")
    args = parser.parse_args()
    os.environ.pop("DAGSTER_HOME", None)

    from seem_dagster import backends

    backends.embedder("minilm").encode(["warm up"])
    _ = backends.extractor("embedded").nlp  # spaCy loaded before any timing
    runs = [one_run(args.data, args.conversation, not args.no_dagster_home) for _ in range(args.repeat)]
    full = statistics.median(r["full"] for r in runs)
    turn = statistics.median(r["turn"] for r in runs)
    session = statistics.median(r["session"] for r in runs)
    print(f"{args.conversation}: {runs[0]['passages']} turns; {'a persistent' if not args.no_dagster_home else 'in-memory'} "
          f"Dagster instance; median of {len(runs)} runs")
    print(f"full build        {full:6.2f} s")
    print(f"forget one turn   {turn:6.2f} s  ({turn / full:.2f} of the full build)")
    print(f"forget a session  {session:6.2f} s  ({session / full:.2f} of the full build; {runs[0]['session_turns']} turns)")
    print("each run's seconds (full / turn / session): "
          + "; ".join(f"{r['full']:.2f} / {r['turn']:.2f} / {r['session']:.2f}" for r in runs))
    print(f"removed by the one-turn forget: {runs[0]['turn_removed']}")
    print(f"removed by the session forget:  {runs[0]['session_removed']}")


if __name__ == "__main__":
    main()
