"""A one-shot `seem query` from a new process, beside `seem --help`: what a shell user, the query job
and a notebook's first question pay before any answer.

    .venv/bin/python benchmarks/cold_start.py [--store DIR] [--conversation conv-41] [--repeat 5]

Without --store it builds the conversation into a temporary store first. It times, as wall clock of
whole processes (median of --repeat runs, each after one unmeasured run so the files are in the page
cache): `seem --help`; `seem query` of a question whose list form spaCy's tagger reads (a plural may
follow its "what"), of a what-question that needs no tag, and of a when-question. Nothing is shared
between the runs.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo_dev7.json"
SEEM = str(Path(sys.executable).parent / "seem")
# One that spaCy's tagger must read (a plural may follow "what"), one that needs no tag, one of another form.
QUESTIONS = ("What activities does Maria do with the kids?", "What did Maria donate to the homeless shelter?",
             "When did John go to the beach?")


def wall(args: list[str]) -> float:
    started = time.perf_counter()
    done = subprocess.run([SEEM, *args], capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(done.stderr[-2000:])
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store")
    parser.add_argument("--conversation", default="conv-41")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    store = args.store or tempfile.mkdtemp(prefix="seem-cold-")
    if args.store is None:
        wall(["build", "--input", str(args.data), "--conversation", args.conversation, "--store", store, "--quiet"])
    runs = {"seem --help": ["--help"]}
    for q in QUESTIONS:
        runs[f"seem query {q!r}"] = ["query", "--store", store, "--conversation", args.conversation, q]
    figures = {}
    for name, argv in runs.items():
        wall(argv)  # the files in the page cache, as for a user's second command
        figures[name] = statistics.median(wall(argv) for _ in range(args.repeat))
    base = figures["seem --help"]
    for name, seconds in figures.items():
        print(f"{seconds:6.2f} s  ({seconds / base:4.1f}x --help)  {name}")


if __name__ == "__main__":
    main()
