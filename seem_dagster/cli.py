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


def _llm_settings(args: argparse.Namespace):
    from seem_dagster.llm.settings import LlmSettings

    return LlmSettings.from_env(
        backend=args.backend, model=args.model, base_url=args.base_url, response_format=args.response_format,
        api_key_env=args.api_key_env, **({"max_concurrency": args.max_concurrency} if args.max_concurrency else {}),
        **({"max_tokens": args.max_tokens} if args.max_tokens else {}),
    )


def _llm_summary(store: str, conversation_id: str) -> str | None:
    import polars as pl

    from seem_dagster.schemas import LlmCalls
    from seem_dagster.store.snapshot import read_table, table_path

    calls = read_table(table_path(store, "llm_calls", conversation_id))
    if calls.height == 0:
        return None
    status = dict(calls.group_by(LlmCalls.status).len().iter_rows())
    return (f"  llm: {int(calls[LlmCalls.calls].sum())} model calls, {calls.filter(pl.col(LlmCalls.cached)).height} cached results, "
            f"{status.get('ok', 0)} ok, {status.get('failed', 0)} failed, {status.get('unanswered', 0)} unanswered; "
            f"tokens {int(calls[LlmCalls.prompt_tokens].sum())} in / {int(calls[LlmCalls.completion_tokens].sum())} out")


def cmd_build(args: argparse.Namespace) -> int:
    from seem_dagster.ingest import IngestOptions, InputError
    from seem_dagster.registry import register_file

    try:
        llm = _llm_settings(args)
    except ValueError as err:
        return _fail(str(err), EXIT_INPUT)

    options = IngestOptions(
        max_turn_chars=args.max_turn_chars, allow_empty_turns=args.allow_empty_turns,
        speakers=tuple(args.only_speaker) if args.only_speaker else None,
    )
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

    from seem_dagster.defs.resources import LlmResource

    defs = build_defs(store_root=args.store, llm=LlmResource.from_settings(llm), max_turn_chars=args.max_turn_chars, allow_empty_turns=args.allow_empty_turns)
    outcomes = build_conversations(defs, [r.conversation_id for r in registered], progress=not args.quiet)
    failed = [o for o in outcomes if not o.success]
    for reg, outcome in zip(registered, outcomes):
        excluded = f"; {reg.excluded} turns by other speakers left out (--only-speaker)" if reg.excluded else ""
        print(f"{reg.conversation_id}: {reg.passages} passages ({reg.status}{excluded})")
        summary = _llm_summary(args.store, reg.conversation_id) if outcome.success else None
        if summary:
            print(summary)
    print(f"store: {Path(args.store).resolve() if '://' not in args.store else args.store}")
    if failed:
        first = failed[0]
        return _fail(f"{len(failed)} of {len(outcomes)} conversations failed; {first.conversation_id}: {first.error}", EXIT_RUN)
    return 0


def cmd_query(args: argparse.Namespace) -> int:
    import json
    from datetime import datetime

    from seem_dagster import backends
    from seem_dagster.defs.resources import MemorySettings
    from seem_dagster.retrieval.answer import ask, passages_json
    from seem_dagster.retrieval.load import load_index
    from seem_dagster.store.snapshot import SnapshotError

    try:
        date = datetime.fromisoformat(args.date) if args.date else None
    except ValueError:
        return _fail(f"--date {args.date!r} is not an ISO date", EXIT_INPUT)
    try:
        llm = _llm_settings(args)
    except ValueError as err:
        return _fail(str(err), EXIT_INPUT)
    try:
        index = load_index(args.store, args.conversation)
    except SnapshotError as err:
        return _fail(str(err), EXIT_RUN)
    session = None
    if llm.enabled:
        from seem_dagster.llm.session import LlmSession

        session = LlmSession(llm, args.store, args.conversation)
    memory = MemorySettings()
    answered = ask(
        index, args.question, date, backends.extractor(memory.extractor), backends.embedder(memory.embedder),
        memory.retrieval_config(), budget_words=args.budget, llm=session,
    )
    answer = answered.answer or {}
    llm_calls = None
    if session is not None:
        llm_calls = [{k: getattr(r, k) for k in ("prompt", "status", "cached", "calls", "prompt_tokens", "completion_tokens", "error")}
                     for r in session.records]
    items = passages_json(index, answered, args.k)
    if args.json:
        print(json.dumps({
            "question": args.question, "conversation_id": args.conversation, "date": answered.date.isoformat(),
            "mode": answered.result.mode, "passages": items,
            "seed_facts": [s.__dict__ for s in answered.result.seeds],
            "context": answered.context, "answer": answer.get("answer"), "answer_evidence": answer.get("evidence"),
            "llm_calls": llm_calls,
        }, indent=2, ensure_ascii=False))
        return 0
    print(f"Q: {args.question}  (as of {answered.date:%Y-%m-%d}, {answered.result.mode} retrieval, {answered.seconds * 1000:.0f} ms)\n")
    for item in items:
        print(f"{item['rank']:>3}. [{item['source_ref']}] {item['timestamp'][:10]} {item['speaker']}: {item['text']}")
        print(f"     why: {item['reason']}")
    print("\n" + answered.context)
    if session is None:
        print("\n(no answering model configured: the evidence above is the output; see --backend)")
    elif answered.answer is None:
        failed = [r for r in session.records if r.status != "ok"]
        print(f"\nA: (the model gave no valid answer: {failed[-1].error if failed else 'unknown'})")
    else:
        print(f"\nA: {answer['answer']}  (evidence: {', '.join(answer['evidence']) or 'none cited'})")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from seem_dagster.demo import run_demo

    return run_demo(store=args.store, sample_dir=SAMPLE_DIR, out=sys.stdout)


def _int_list(text: str, flag: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"{flag} {text!r}: expected comma-separated integers") from None
    if not values or min(values) <= 0:
        raise ValueError(f"{flag} {text!r}: expected positive integers")
    return values


def cmd_eval(args: argparse.Namespace) -> int:
    from seem_dagster.evaluation.run import EvalSettings, run_evaluation
    from seem_dagster.ingest import InputError

    try:
        settings = EvalSettings(
            benchmark=args.benchmark, data=args.data, out=args.out, store=args.store,
            methods=[m.strip() for m in args.methods.split(",") if m.strip()],
            conversations=args.conversation, progress=not args.quiet,
            ks=_int_list(args.k, "--k") if args.benchmark == "locomo" else [1, 3, 5, 10, 30, 50],
            budgets=_int_list(args.budget, "--budget") if args.benchmark == "locomo" else [],
            granularities=[g.strip() for g in getattr(args, "granularity", "").split(",") if g.strip()],
            corpus=getattr(args, "corpus", "all"),
            llm=_llm_settings(args),
            answer_methods=[m.strip() for m in args.answer_methods.split(",") if m.strip()],
            answer_budget=args.answer_budget,
        )
        summary = run_evaluation(settings)
    except InputError as err:
        return _fail(str(err), EXIT_INPUT)
    except ValueError as err:
        return _fail(str(err), EXIT_INPUT)
    except RuntimeError as err:
        return _fail(str(err), EXIT_RUN)
    print(summary)
    return 0


def _add_llm_flags(p: argparse.ArgumentParser) -> None:
    from seem_dagster.llm.settings import BACKENDS, RESPONSE_FORMATS

    g = p.add_argument_group("language model (default from SEEM_LLM_* variables, else embedded: no model)")
    g.add_argument("--backend", choices=BACKENDS, help="embedded (spaCy, no model), openai (any OpenAI-compatible server) or vllm (offline batch)")
    g.add_argument("--model", help="model name as the server or vLLM knows it")
    g.add_argument("--base-url", help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1")
    g.add_argument("--response-format", choices=RESPONSE_FORMATS,
                   help="json_schema (OpenAI, vllm serve; the default) or json_object with the schema (llama.cpp's server)")
    g.add_argument("--api-key-env", help="environment variable holding the API key (default SEEM_LLM_API_KEY); never printed")
    g.add_argument("--max-concurrency", type=int, help="requests in flight to the server (default 8)")
    g.add_argument("--max-tokens", type=int, help="cap on each reply's tokens (default 768; each prompt has its own lower cap)")


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
    b.add_argument("--only-speaker", action="append", metavar="NAME",
                   help="keep only this speaker's turns, e.g. LongMemEval's 'user' (repeatable; the rest are counted)")
    b.add_argument("--quiet", action="store_true", help="no progress bar")
    _add_llm_flags(b)
    b.set_defaults(func=cmd_build)

    q = sub.add_parser("query", help="retrieve the evidence for a question from a built conversation")
    q.add_argument("question")
    q.add_argument("--store", default=default_store(), help="snapshot root (default: %(default)s)")
    q.add_argument("--conversation", required=True, metavar="ID")
    q.add_argument("--date", help="the question's date (ISO); relative dates in the question resolve against it")
    q.add_argument("--k", type=int, default=10, help="passages to return (default: %(default)s)")
    q.add_argument("--budget", type=int, default=1000, help="context budget in words (default: %(default)s)")
    q.add_argument("--json", action="store_true", help="print JSON: passages with passage_id, source_ref, text, timestamp, score, reason")
    _add_llm_flags(q)
    q.set_defaults(func=cmd_query)

    d = sub.add_parser("demo", help="build the bundled sample end to end and show what the memory holds")
    d.add_argument("--store", default=default_store(), help="snapshot root (default: %(default)s)")
    d.set_defaults(func=cmd_demo)

    from seem_dagster.evaluation.methods import METHODS

    ev = sub.add_parser("eval", help="measure retrieval of every method on LoCoMo or LongMemEval")
    bench = ev.add_subparsers(dest="benchmark", required=True)
    for name, helptext in (("locomo", "LoCoMo JSON (dev file or the full ten conversations)"),
                           ("longmemeval", "LongMemEval JSON (dev file or a full release file)")):
        e = bench.add_parser(name, help=helptext)
        e.add_argument("--data", required=True, help=helptext)
        e.add_argument("--out", required=True, help="folder for results.json, results.md and the plots")
        e.add_argument("--store", help="where the memories are built and kept between runs (default: OUT/store)")
        e.add_argument("--methods", default=",".join(METHODS), help="comma-separated (default: all: %(default)s)")
        e.add_argument("--conversation", action="append", metavar="ID", help="only this conversation/question (repeatable)")
        e.add_argument("--quiet", action="store_true", help="no progress bars")
        e.add_argument("--answer-methods", default="seem,hybrid",
                       help="with --backend: methods whose contexts are answered and judged (default: %(default)s)")
        e.add_argument("--answer-budget", type=int, default=1000, help="with --backend: context words per answer (default: %(default)s)")
        _add_llm_flags(e)
        if name == "locomo":
            e.add_argument("--k", default="5,10,25,50", help="cut-offs (default: %(default)s)")
            e.add_argument("--budget", default="500,1000,2000", help="context budgets in words (default: %(default)s)")
        else:
            e.add_argument("--granularity", default="session,turn", help="session, turn or both (default: %(default)s)")
            e.add_argument("--corpus", choices=("user", "all"), default="user",
                           help="turns in the memory: the official protocol's user turns, or all turns (default: %(default)s)")
        e.set_defaults(func=cmd_eval)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        return _fail("interrupted", 130)


if __name__ == "__main__":
    sys.exit(main())
