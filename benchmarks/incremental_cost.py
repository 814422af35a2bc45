"""What a rebuild costs against a full build, through Dagster, in one process.

    .venv/bin/python benchmarks/incremental_cost.py [--data PATH --conversation ID --hold-out SESSION] [--repeat N] [--cli]

Builds one conversation three ways into fresh stores and prints the wall time of each, split into
what happens outside the Dagster run (registering the input, assembling the definitions), the run's
steps and Dagster's own overhead, with the ratio against the full build measured in the same process:

- full: everything from scratch (the baseline; its models are warmed first, so no build pays for loading them);
- unchanged: the same input again, every cache warm;
- append: the last session arrives after a build of the others.

``--cli`` also times `seem build` as a user runs it (a new process each time: imports and model
loading included) for a full build, an unchanged rebuild and an appended session; ``--dagster`` the
same three as Dagster runs them for the UI, the sensor and the schedule (`dagster job execute`). Each figure is the
median of ``--repeat`` runs (the machine is shared: single runs vary by a factor of two).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "sample_conversation.jsonl"


def jsonl_without(path: Path, conversation: str | None, session: str | None, out: Path) -> tuple[Path, Path]:
    """(whole, without the held-out session) as JSONL files of one conversation."""
    from seem_dagster.ingest import load_input

    (conv,) = load_input(path, conversations=[conversation] if conversation else None)
    rows = conv.passages.sort("session_index", "turn_index").to_dicts()
    held = session or rows[-1]["session_id"]

    def line(r):
        return json.dumps({"conversation_id": r["conversation_id"], "session_id": r["session_id"], "speaker": r["speaker"],
                           "text": r["text"], "timestamp": r["timestamp"].isoformat(), "id": r["source_ref"]})

    whole, early = out / "whole.jsonl", out / "early.jsonl"
    whole.write_text("".join(line(r) + "\n" for r in rows))
    early.write_text("".join(line(r) + "\n" for r in rows if r["session_id"] != held))
    return whole, early


def build(store: Path, path: Path) -> dict:
    """One `seem build` without the process: registration, definitions, the run; seconds of each."""
    from dagster import DagsterInstance

    from seem_dagster.config import Layer, resolve
    from seem_dagster.defs.assemble import build_defs
    from seem_dagster.defs.runner import build_conversations
    from seem_dagster.registry import register_file

    started = time.perf_counter()
    registered = register_file(store, str(path), "jsonl")
    registered_at = time.perf_counter()
    defs = build_defs(resolve([Layer("benchmark", {"store.root": str(store)})]))
    defs_at = time.perf_counter()
    (outcome,) = build_conversations(defs, [r.conversation_id for r in registered], instance=DagsterInstance.ephemeral())
    done = time.perf_counter()
    assert outcome.success, outcome.error
    steps = outcome.step_seconds or {}
    return {"total": done - started, "register": registered_at - started, "definitions": defs_at - registered_at,
            "run": done - defs_at, "steps": steps, "dagster_overhead": done - defs_at - sum(steps.values()),
            "passages": registered[0].passages}


def dagster_run(store: Path, path: Path, home: Path) -> float:
    """Register ``path`` (as the sensor does) and time `dagster job execute` of build_memory for it."""
    import os

    from seem_dagster.registry import register_file

    (reg,) = register_file(store, str(path), "jsonl")
    from dagster import DagsterInstance
    from dagster._core.instance.ref import InstanceRef

    with DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:  # as the sensor adds it
        if reg.conversation_id not in instance.get_dynamic_partitions("conversations"):
            instance.add_dynamic_partitions("conversations", [reg.conversation_id])
    env = {**os.environ, "DAGSTER_HOME": str(home), "SEEM_STORE": str(store)}
    started = time.perf_counter()
    out = subprocess.run([str(Path(sys.executable).parent / "dagster"), "job", "execute", "-m", "seem_dagster.definitions", "-j",
                          "build_memory", "--tags", json.dumps({"dagster/partition": reg.conversation_id})],
                         capture_output=True, text=True, env=env)
    if out.returncode or "RUN_SUCCESS" not in out.stderr + out.stdout:
        raise SystemExit(out.stderr[-3000:])
    return time.perf_counter() - started


def cli(store: Path, path: Path) -> float:
    started = time.perf_counter()
    out = subprocess.run([str(Path(sys.executable).parent / "seem"), "build", "--input", str(path), "--store", str(store), "--quiet"],
                         capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(out.stderr)
    return time.perf_counter() - started


def median_run(runs: list[dict]) -> dict:
    """The run of median total time (its parts are that run's, so they add up)."""
    return sorted(runs, key=lambda r: r["total"])[len(runs) // 2]


def show(name: str, figures: dict, base: dict) -> None:
    steps = ", ".join(f"{k} {v:.2f}" for k, v in sorted(figures["steps"].items(), key=lambda kv: -kv[1]) if v >= 0.1)
    print(f"{name:<10} {figures['total']:7.2f} s  ({figures['total'] / base['total']:.2f} of full)  register {figures['register']:.2f}, "
          f"definitions {figures['definitions']:.2f}, run {figures['run']:.2f} = steps {sum(figures['steps'].values()):.2f} "
          f"+ Dagster {figures['dagster_overhead']:.2f}")
    print(f"{'':<10} steps over 0.1 s: {steps}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, default=SAMPLE)
    parser.add_argument("--conversation")
    parser.add_argument("--hold-out", help="the session that arrives last (default: the last one)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cli", action="store_true", help="also time `seem build` in new processes")
    parser.add_argument("--dagster", action="store_true", help="also time `dagster job execute` runs")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="seem-incremental-"))
    whole, early = jsonl_without(args.data, args.conversation, args.hold_out, work)

    # Warm the models and Dagster in a throw-away store, so no measured build pays for loading them.
    build(work / "warm", whole)
    fulls, unchanged, appends, clis, runs = [], [], [], [], []
    home = work / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    for i in range(args.repeat):
        fulls.append(build(work / f"full{i}", whole))
        unchanged.append(build(work / f"full{i}", whole))
        build(work / f"append{i}", early)
        appends.append(build(work / f"append{i}", whole))
        if args.cli:
            first = cli(work / f"cli{i}", whole)
            again = cli(work / f"cli{i}", whole)
            cli(work / f"cli-append{i}", early)
            clis.append((first, again, cli(work / f"cli-append{i}", whole)))
        if args.dagster:
            first = dagster_run(work / f"dg{i}", whole, home)
            again = dagster_run(work / f"dg{i}", whole, home)
            dagster_run(work / f"dg-append{i}", early, home)
            runs.append((first, again, dagster_run(work / f"dg-append{i}", whole, home)))
    full = median_run(fulls)
    n_early = sum(1 for _ in early.open())
    print(f"{args.data.name}: {full['passages']} passages, {full['passages'] - n_early} in the appended session; "
          f"medians of {args.repeat} runs")
    show("full", full, full)
    show("unchanged", median_run(unchanged), full)
    show("append", median_run(appends), full)
    for label, timings in (("seem build, a new process each", clis), ("dagster job execute build_memory", runs)):
        if timings:
            first, again, append = (sorted(c[i] for c in timings)[len(timings) // 2] for i in range(3))
            print(f"{label}: full {first:.2f} s, unchanged {again:.2f} s ({again / first:.2f} of full), "
                  f"append {append:.2f} s ({append / first:.2f} of full)")


if __name__ == "__main__":
    main()
