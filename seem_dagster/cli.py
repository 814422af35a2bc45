"""`seem`: build memories, run the demo. A non-zero exit and a one-line reason on any error."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

EXIT_INPUT = 2
EXIT_RUN = 1

SAMPLE_DIR = Path(__file__).resolve().parent.parent / "data"


def _fail(message: str, code: int) -> int:
    print(f"seem: error: {message}", file=sys.stderr)
    return code


def cmd_build(args: argparse.Namespace) -> int:
    from seem_dagster.ingest import IngestOptions, InputError
    from seem_dagster.registry import register_file

    options = IngestOptions(max_turn_chars=args.max_turn_chars, allow_empty_turns=args.allow_empty_turns)
    try:
        registered = register_file(
            args.store, args.input, args.format, options, questions=args.questions, conversations=args.conversation
        )
    except InputError as err:
        return _fail(str(err), EXIT_INPUT)
    for reg in registered:
        for skipped in reg.skipped:
            print(f"seem: skipped (--allow-empty-turns): {skipped}", file=sys.stderr)
    from seem_dagster.defs.runner import build_conversations
    from seem_dagster.definitions import build_defs

    defs = build_defs(store_root=args.store, max_turn_chars=args.max_turn_chars, allow_empty_turns=args.allow_empty_turns)
    outcomes = build_conversations(defs, [r.conversation_id for r in registered], progress=not args.quiet)
    failed = [o for o in outcomes if not o.success]
    for reg in registered:
        print(f"{reg.conversation_id}: {reg.passages} passages ({reg.status})")
    print(f"store: {Path(args.store).resolve() if '://' not in args.store else args.store}")
    if failed:
        first = failed[0]
        return _fail(f"{len(failed)} of {len(outcomes)} conversations failed; {first.conversation_id}: {first.error}", EXIT_RUN)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from seem_dagster.demo import run_demo

    return run_demo(store=args.store, sample_dir=SAMPLE_DIR, out=sys.stdout)


def parser() -> argparse.ArgumentParser:
    from seem_dagster.defs.resources import default_store
    from seem_dagster.ingest import FORMATS, IngestOptions

    p = argparse.ArgumentParser(prog="seem", description="SEEM memory for conversational agents, built with Dagster.")
    sub = p.add_subparsers(dest="command", required=True)

    b = sub.add_parser("build", help="ingest an input file and materialize every memory asset of its conversations")
    b.add_argument("--input", required=True, help="LoCoMo JSON, LongMemEval JSON or JSONL chat log")
    b.add_argument("--format", choices=FORMATS, help="input format (detected when omitted)")
    b.add_argument("--conversation", action="append", metavar="ID", help="only this conversation (repeatable)")
    b.add_argument("--store", default=default_store(), help="snapshot root, a folder or fsspec URL (default: %(default)s)")
    b.add_argument("--questions", help="JSONL questions for a JSONL input (see README)")
    b.add_argument("--max-turn-chars", type=int, default=IngestOptions.max_turn_chars, help="reject longer turns (default: %(default)s)")
    b.add_argument("--allow-empty-turns", action="store_true", help="skip empty turns (each is reported) instead of stopping")
    b.add_argument("--quiet", action="store_true", help="no progress bar")
    b.set_defaults(func=cmd_build)

    d = sub.add_parser("demo", help="build the bundled sample end to end and show what the memory holds")
    d.add_argument("--store", default=default_store(), help="snapshot root (default: %(default)s)")
    d.set_defaults(func=cmd_demo)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        return _fail("interrupted", 130)


if __name__ == "__main__":
    sys.exit(main())
