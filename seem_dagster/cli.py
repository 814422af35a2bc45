"""`seem`: build memories, query them, evaluate, show the configuration. A non-zero exit and a
one-line reason on any error.

Every command reads the one configuration tree (``seem_dagster.config``): ``--config FILE``,
``SEEM_*`` variables, ``--set section.setting=value``, and flags that are shorthands for single
settings (``--backend`` is ``--set llm.backend=...``), so a flag's default is the tree's.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import typing
from dataclasses import dataclass
from pathlib import Path

EXIT_INPUT = 2
EXIT_RUN = 1

SAMPLE_DIR = Path(__file__).resolve().parent.parent / "data"


def _fail(message: str, code: int) -> int:
    print(shown(f"seem: error: {message}"), file=sys.stderr)
    return code


# What a terminal would act on rather than show: C0 controls but newline and tab (ESC starts a colour or
# cursor sequence, BEL rings, CR overwrites the line), DEL, C1 controls (U+009B is a CSI of its own),
# and a lone surrogate (no character; it cannot even be written as UTF-8).
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")


def shown(text: str) -> str:
    """``text`` as the terminal gets it: each control character written as its escape (\\x1b, \\x07,
    \\x9b, a surrogate \\udcff), so a turn's or a result's text can neither move the cursor, recolour or
    clear the screen nor hide what surrounds it. The one function every text output of `seem query`
    and `seem sql` (table and CSV) goes through; the memory keeps the text exact (`--json`, `--format json`)."""
    return _CONTROLS.sub(lambda m: f"\\x{ord(m[0]):02x}" if ord(m[0]) < 0x100 else f"\\u{ord(m[0]):04x}", text)


def _text_argument(value: str, name: str) -> str:
    """A text argument (a question, SQL, an id) that can be read: a byte that is not UTF-8 reaches Python
    as a lone surrogate, refused here in one line naming the argument (``ingest.errors.text_problem``)."""
    from seem_dagster.ingest.errors import text_problem

    problem = text_problem(value)
    if problem is not None:
        raise ArgumentRefused(f"{name}: {problem}")
    return value


def _date_argument(value: str, name: str, parse):
    """``parse(value)`` (an ISO date or date-time) within the supported dates (``ingest.dates``), or one line."""
    from seem_dagster.ingest import dates

    _text_argument(value, name)
    try:
        return dates.check_range(parse(value))
    except dates.DateOutOfRange as err:
        raise ArgumentRefused(f"{name} {value!r}: {err}") from None
    except ValueError:
        raise ArgumentRefused(f"{name} {value!r} is not an ISO date") from None


class ArgumentRefused(ValueError):
    """A command-line argument refused before anything runs: one line, exit 2."""


@dataclass(frozen=True)
class Shortcut:
    flag: str
    key: str  # the setting it sets
    action: str = "store"  # store | store_true | append
    metavar: str | None = None


STORE = Shortcut("--store", "store.root", metavar="DIR")
LLM_FLAGS = (
    Shortcut("--backend", "llm.backend"), Shortcut("--model", "llm.model"), Shortcut("--base-url", "llm.base_url", metavar="URL"),
    Shortcut("--response-format", "llm.response_format"), Shortcut("--api-key-env", "llm.api_key_env", metavar="VAR"),
    Shortcut("--max-concurrency", "llm.max_concurrency", metavar="N"), Shortcut("--max-tokens", "llm.max_tokens", metavar="N"),
)
INGEST_FLAGS = (
    Shortcut("--max-turn-chars", "ingest.max_turn_chars", metavar="N"),
    Shortcut("--allow-empty-turns", "ingest.allow_empty_turns", "store_true"),
    Shortcut("--only-speaker", "ingest.only_speakers", "append", metavar="NAME"),
)


def _dest(shortcut: Shortcut) -> str:
    return "set_" + shortcut.key.replace(".", "__")


def _add_config_flags(p: argparse.ArgumentParser, shortcuts=()) -> None:
    from seem_dagster.config import SETTINGS

    g = p.add_argument_group("configuration (see `seem config show`; flags are shorthands for one setting each)")
    g.add_argument("--config", metavar="FILE", help="YAML or TOML file shaped like the tree (default: $SEEM_CONFIG)")
    g.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="assignments",
                   help="any setting, e.g. --set retrieval.top_facts=8 (repeatable; wins over the file and environment)")
    for s in shortcuts:
        setting = SETTINGS[s.key]
        choices = typing.get_args(setting.annotation) if typing.get_origin(setting.annotation) is typing.Literal else None
        helptext = f"{setting.description} (sets {s.key})"
        if s.action == "store_true":
            g.add_argument(s.flag, action="store_true", default=None, dest=_dest(s), help=helptext)
        else:
            g.add_argument(s.flag, action=s.action, dest=_dest(s), metavar=s.metavar, choices=choices, help=helptext)


def _resolve(args: argparse.Namespace, shortcuts=()):
    """The tree for this command: defaults < file < environment < flags < --set. Raises ConfigError."""
    from seem_dagster.config import Layer, assignments_layer, resolve_standard

    values = {s.key: getattr(args, _dest(s)) for s in shortcuts if getattr(args, _dest(s), None) is not None}
    flags = Layer("flags", values, text=True, origin={s.key: f"flag {s.flag}" for s in shortcuts if s.key in values})
    return resolve_standard(args.config, (flags, assignments_layer(args.assignments)))


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


BUILD_FLAGS = (STORE, *INGEST_FLAGS, *LLM_FLAGS)


def _memory(resolved):
    from seem_dagster.memory import Memory

    return Memory(resolved)


def cmd_build(args: argparse.Namespace) -> int:
    from seem_dagster.config import ConfigError
    from seem_dagster.ingest import InputError
    from seem_dagster.memory.writes import BuildsFailed, WriterBusy

    try:
        resolved = _resolve(args, BUILD_FLAGS)
    except ConfigError as err:
        return _fail(str(err), EXIT_INPUT)
    store = resolved.config.store.root
    failed = None
    try:
        results = _memory(resolved).add_file(args.input, args.format, questions=args.questions, conversations=args.conversation,
                                             rebuild=args.rebuild, progress=not args.quiet)
    except InputError as err:
        return _fail(str(err), EXIT_INPUT)
    except ConfigError as err:  # an executor that cannot run here (its extra missing, no shared instance)
        return _fail(str(err), EXIT_INPUT)
    except BuildsFailed as err:
        results, failed = err.results, err
    except WriterBusy as err:  # another writer of one of its conversations held it too long: nothing written
        return _fail(str(err), EXIT_RUN)
    for r in results:
        for skipped in r.skipped:
            print(f"seem: skipped (ingest.allow_empty_turns): {skipped}", file=sys.stderr)
        if r.status == "empty":
            print(f"seem: skipped conversation {r.conversation_id}: every turn is empty, nothing to build", file=sys.stderr)
        elif r.status == "forgotten":
            print(f"seem: skipped conversation {r.conversation_id}: every turn of it was forgotten ({r.forgotten} left out), "
                  "nothing to build", file=sys.stderr)
    built = [r for r in results if r.status not in ("empty", "forgotten")]
    if not built and not any(r.status == "forgotten" for r in results):
        return _fail(f"{args.input}: no conversation with a non-empty turn to build", EXIT_INPUT)
    for r in built:
        excluded = f"; {r.excluded} turns by other speakers left out (ingest.only_speakers)" if r.excluded else ""
        excluded += f"; {r.forgotten} forgotten turns left out" if r.forgotten else ""
        if r.status == "current":
            print(f"{r.conversation_id}: {r.passages} passages (unchanged{excluded}; its memory is current: not rebuilt, "
                  "--rebuild to build it anyway)")
            continue
        print(f"{r.conversation_id}: {r.passages} passages ({'failed' if r.status == 'failed' else r.status}{excluded})")
        summary = _llm_summary(store, r.conversation_id) if r.build_id else None
        if summary:
            print(summary)
    print(f"store: {Path(store).resolve() if '://' not in store else store}")
    if failed is not None:
        return _fail(str(failed), EXIT_RUN)
    return 0


MAX_QUESTION_CHARS = 4000
QUERY_FLAGS = (STORE, Shortcut("--k", "query.k", metavar="N"), Shortcut("--budget", "query.budget_tokens", metavar="TOKENS"),
               Shortcut("--property-lines", "properties.context_lines", metavar="N"), *LLM_FLAGS)


def cmd_query(args: argparse.Namespace) -> int:
    """Errors are one line on stderr; with --json also ``{"error": ..., "exit_code": ...}`` on stdout."""
    import json

    def fail(message: str, code: int) -> int:
        if args.json:  # ASCII JSON: a lone surrogate of the arguments is written as its escape
            print(json.dumps({"question": args.question, "conversation_id": args.conversation, "error": message, "exit_code": code}))
        return _fail(message, code)

    try:
        return _query(args)
    except QueryError as err:
        return fail(err.message, err.code)
    except ArgumentRefused as err:
        return fail(str(err), EXIT_INPUT)


@dataclass
class QueryError(Exception):
    message: str
    code: int


def _query(args: argparse.Namespace) -> int:
    import json
    from datetime import datetime

    from seem_dagster.config import ConfigError
    from seem_dagster.llm.engine import EngineError
    from seem_dagster.memory import InvalidRequest, UnknownConversation
    from seem_dagster.retrieval.as_of import parse_as_of
    from seem_dagster.store.keys import InvalidConversationId, check_conversation_id
    from seem_dagster.store.snapshot import SnapshotError

    try:
        check_conversation_id(args.conversation)
    except InvalidConversationId as err:
        raise QueryError(f"--conversation: {err}", EXIT_INPUT) from None
    _text_argument(args.question, "the question")
    if not args.question.strip():
        raise QueryError("the question is empty", EXIT_INPUT)
    if len(args.question) > MAX_QUESTION_CHARS:
        raise QueryError(f"the question is {len(args.question)} characters, over the limit of {MAX_QUESTION_CHARS}", EXIT_INPUT)
    date = _date_argument(args.date, "--date", datetime.fromisoformat) if args.date else None
    as_of = _date_argument(args.as_of, "--as-of", parse_as_of) if args.as_of else None
    try:
        resolved = _resolve(args, QUERY_FLAGS)
    except ConfigError as err:
        raise QueryError(str(err), EXIT_INPUT) from None
    config = resolved.config
    try:
        recall = _memory(resolved).query(args.conversation, args.question, date=date, as_of=as_of)
    except UnknownConversation as err:
        raise QueryError(str(err), EXIT_INPUT) from None
    except InvalidRequest as err:
        raise QueryError(str(err), EXIT_INPUT) from None
    except SnapshotError as err:
        raise QueryError(str(err), EXIT_RUN) from None
    except EngineError as err:
        raise QueryError(f"language model ({config.llm.backend} at {config.llm.base_url or config.llm.model}): {err}", EXIT_RUN) from None
    if args.json:
        print(json.dumps(recall.to_json(), indent=2, ensure_ascii=False))
        return 0
    memory = f"; the memory as it stood on {as_of:%Y-%m-%d}" if as_of else ""
    out = [f"Q: {args.question}  (asked {recall.date:%Y-%m-%d}{memory}, {recall.mode} retrieval, {recall.seconds * 1000:.0f} ms)\n"]
    for hit in recall.hits:
        out.append(f"{hit.rank:>3}. [{hit.source_ref}] {hit.timestamp:%Y-%m-%d} {hit.speaker}: {hit.text}")
        out.append(f"     why: {hit.reason}")
    out.append(f"\nContext ({recall.context.tokens} of {config.query.budget_tokens} tokens):\n" + recall.context.text)
    if recall.llm_calls is None:
        out.append("\n(no answering model configured: the evidence above is the output; see --backend)")
    elif recall.answer is None:
        failed = [r for r in recall.llm_calls if r["status"] != "ok"]
        out.append(f"\nA: (the model gave no valid answer: {failed[-1]['error'] if failed else 'unknown'})")
    else:
        out.append(f"\nA: {recall.answer['answer']}  (evidence: {', '.join(recall.answer['evidence']) or 'none cited'})")
    print(shown("\n".join(out)))
    return 0


SQL_FLAGS = (STORE, Shortcut("--max-rows", "sql.max_rows", metavar="N"), Shortcut("--timeout", "sql.timeout_s", metavar="SECONDS"))


def cmd_sql(args: argparse.Namespace) -> int:
    from seem_dagster.config import ConfigError
    from seem_dagster.memory import InvalidRequest
    from seem_dagster.sql.guard import SqlRefused
    from seem_dagster.sql.output import render, render_schema
    from seem_dagster.store.snapshot import SnapshotError

    if not args.schema and args.query is None:
        return _fail("give a query (one SELECT statement) or --schema", EXIT_INPUT)
    try:
        if args.query is not None:
            _text_argument(args.query, "the query")
        if args.conversation is not None:
            _text_argument(args.conversation, "--conversation")
        resolved = _resolve(args, SQL_FLAGS)
    except ArgumentRefused as err:
        return _fail(str(err), EXIT_INPUT)
    except ConfigError as err:
        return _fail(str(err), EXIT_INPUT)
    config = resolved.config
    with _memory(resolved) as memory:
        try:
            if args.schema:
                described = memory.sql_schema(args.conversation)
                _say_skipped(described.pop("skipped"))
                print(render_schema(described, "json" if args.format == "json" else "table"))
                return 0
            result = memory.sql(args.query, args.conversation)
            text = render(result if args.format == "json" else _shown_result(result), args.format, config.sql.max_rows)
        except SqlRefused as err:
            return _fail(str(err), EXIT_INPUT)
        except InvalidRequest as err:
            return _fail(str(err), EXIT_INPUT if args.conversation is not None else EXIT_RUN)
        except SnapshotError as err:
            return _fail(str(err), EXIT_RUN)
    _say_skipped(result.skipped)
    print(text)
    if result.truncated and args.format != "table":
        print(f"seem sql: cut at {config.sql.max_rows} rows (sql.max_rows)", file=sys.stderr)
    return 0


def _shown_result(result):
    """The result with every text value and column name as ``shown`` writes it (the table and CSV are
    read in a terminal; ``--format json`` gives the values exact)."""
    import dataclasses

    import polars as pl

    frame = result.frame
    text = [c for c, t in frame.schema.items() if t == pl.String]
    frame = frame.with_columns(pl.col(c).map_elements(shown, return_dtype=pl.String, skip_nulls=True) for c in text)
    names = {c: shown(c) for c in frame.columns}
    if len(set(names.values())) == len(names):
        frame = frame.rename(names)
    return dataclasses.replace(result, frame=frame)


def _say_skipped(skipped: dict) -> None:
    for cid, why in skipped.items():
        print(f"seem sql: {cid} left out: {why}", file=sys.stderr)


def _tools(args: argparse.Namespace, shortcuts):
    """The memory tools over the store, or (None, exit code) after saying why not."""
    from seem_dagster.agent.tools import MemoryTools, ToolInputError
    from seem_dagster.config import ConfigError

    try:
        resolved = _resolve(args, shortcuts)
    except ConfigError as err:
        return None, _fail(str(err), EXIT_INPUT)
    memory = _memory(resolved)
    if not memory.conversations():
        return None, _fail(f"no conversation in the store {resolved.config.store.root}: build one with `seem build`", EXIT_RUN)
    tools = MemoryTools(memory, None)
    try:
        tools.default = tools.conversation(args.conversation) if args.conversation else None
    except ToolInputError as err:
        return None, _fail(str(err), EXIT_INPUT)
    return tools, 0


MCP_FLAGS = (STORE, *SQL_FLAGS[1:], Shortcut("--tokens-file", "agent.tokens_file", metavar="FILE"))


def cmd_mcp(args: argparse.Namespace) -> int:
    tools, code = _tools(args, MCP_FLAGS)
    if tools is None:
        return code
    if args.http is None:
        from seem_dagster.agent.mcp_server import serve

        serve(tools)
        return 0
    from seem_dagster.agent.http_server import ServeError, serve_http
    from seem_dagster.agent.tokens import TokensError

    try:
        serve_http(tools, args.http)
    except (ServeError, TokensError) as err:
        tools.close()
        return _fail(str(err), EXIT_INPUT)
    return 0


TOKENS_FLAGS = (Shortcut("--tokens-file", "agent.tokens_file", metavar="FILE"),)


def cmd_tokens(args: argparse.Namespace) -> int:
    import json

    from seem_dagster.agent import tokens
    from seem_dagster.config import ConfigError

    try:
        path = _resolve(args, TOKENS_FLAGS).config.agent.tokens_file
    except ConfigError as err:
        return _fail(str(err), EXIT_INPUT)
    if path is None:
        return _fail("name the tokens file: --tokens-file FILE (or the setting agent.tokens_file)", EXIT_INPUT)
    try:
        if args.action == "add":
            wanted = [c.strip() for c in (args.conversations or "").split(",") if c.strip()]
            token, record = tokens.add(path, wanted, args.prefix, args.name or "", args.write)
            scope = ", ".join(filter(None, [", ".join(record["conversations"]),
                                            f"every conversation starting {record['prefix']!r}" if record["prefix"] else ""]))
            print(f"token {record['id']} added to {path}; it {'reads and writes' if args.write else 'reads'}: {scope}")
            print("the token (shown once; only its hash is kept):")
            print(token)
        elif args.action == "revoke":
            record = tokens.revoke(path, args.id)
            print(f"token {record['id']} revoked: its next request is refused (a running server re-reads {path})")
        else:
            print(json.dumps(tokens.listed(path), indent=1))
    except tokens.TokensError as err:
        return _fail(str(err), EXIT_INPUT)
    return 0


ASK_FLAGS = (STORE, Shortcut("--max-tool-calls", "agent.max_tool_calls", metavar="N"), *LLM_FLAGS)


def cmd_ask(args: argparse.Namespace) -> int:
    import json
    from datetime import datetime

    try:
        date = _date_argument(args.date, "--date", datetime.fromisoformat) if args.date else None
        _text_argument(args.question, "the question")
    except ArgumentRefused as err:
        return _fail(str(err), EXIT_INPUT)
    if not args.agent:
        return _fail("`seem ask` answers with the tool-using agent: add --agent (`seem query --backend ...` answers "
                     "from SEEM's context in one call)", EXIT_INPUT)
    tools, code = _tools(args, ASK_FLAGS)
    if tools is None:
        return code
    config = tools.config
    if config.llm.backend != "openai":
        return _fail("--agent needs an OpenAI-compatible chat API with tool calls: --backend openai --base-url URL --model NAME "
                     "(vllm serve, llama.cpp's server, a hosted API)", EXIT_INPUT)
    from seem_dagster.agent.answerer import ChatClient, ToolBox, answer_with_tools
    from seem_dagster.agent.mcp_server import build_server
    from seem_dagster.agent.tools import ToolInputError

    try:
        cid = tools.conversation(args.conversation)
        index = tools.index(cid)
    except ToolInputError as err:
        return _fail(str(err), EXIT_RUN)
    from seem_dagster.schemas import Passages

    tools.default = cid
    date = date or index.passages[Passages.timestamp].max()
    try:
        answered = answer_with_tools(args.question, date, cid, ToolBox(build_server(tools)), ChatClient(config.llm, config.agent),
                                     config.agent)
    finally:
        tools.close()
    if args.json:
        print(json.dumps({"conversation_id": cid, "date": date.isoformat(), **answered.to_json()}, indent=2, ensure_ascii=False))
    else:
        print(f"Q: {args.question}  (asked {date:%Y-%m-%d}; {len(answered.tool_calls)} tool calls, {len(answered.model_calls)} model calls)\n")
        for call in answered.tool_calls:
            print(f"  [{call.turn}] {call.name}({call.arguments}){' -> error: ' + call.result if call.error else f' -> {len(call.result)} characters'}")
        print(f"\nA: {answered.answer}" if answered.answer else f"\nA: (no answer: {answered.stopped}; {answered.error})")
    return 0 if answered.answer is not None else EXIT_RUN


def cmd_forget(args: argparse.Namespace) -> int:
    """Forget turns of one conversation; prints what was removed. Bad requests exit 2 and change nothing."""
    import json

    from seem_dagster.config import ConfigError
    from seem_dagster.ingest.dates import parse_iso
    from seem_dagster.memory import BuildFailed, InvalidRequest

    try:
        if args.before is not None:
            _date_argument(args.before, "--before", parse_iso)
        resolved = _resolve(args, (STORE,))
    except ArgumentRefused as err:
        return _fail(str(err), EXIT_INPUT)
    except ConfigError as err:
        return _fail(str(err), EXIT_INPUT)
    try:
        with _memory(resolved) as memory:
            done = memory.forget(args.conversation, turns=args.turn, session_id=args.session, speaker=args.speaker, before=args.before)
    except InvalidRequest as err:
        return _fail(str(err), EXIT_INPUT)
    except BuildFailed as err:
        return _fail(str(err), EXIT_RUN)
    if args.json:
        print(json.dumps(done.to_json(), indent=2, ensure_ascii=False))
    else:
        refs = ", ".join(done.source_refs[:20]) + (f" and {len(done.source_refs) - 20} more" if len(done.source_refs) > 20 else "")
        left = (f"{done.passages} turns remain, published as build {done.build_id[:8]}" if done.build_id
                else "the whole conversation is gone from the store")
        print(shown(f"{done.conversation_id}: forgot {done.turns} turns ({refs}); {left} ({done.seconds:.1f} s)"))
        print("removed: " + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in done.removed.items()))
        print("tombstones (ids and keyed hashes, no text) keep every later build from bringing them back")
    for warning in done.warnings:
        print(f"seem forget: warning: {warning}", file=sys.stderr)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from seem_dagster.config import ConfigError
    from seem_dagster.demo import run_demo

    try:
        resolved = _resolve(args, (STORE,))
    except ConfigError as err:
        return _fail(str(err), EXIT_INPUT)
    return run_demo(resolved, sample_dir=SAMPLE_DIR, out=sys.stdout)


EVAL_FLAGS = (
    Shortcut("--methods", "evaluation.methods", metavar="A,B"),
    Shortcut("--answer-methods", "evaluation.answer_methods", metavar="A,B"),
    Shortcut("--answer-budget", "evaluation.answer_budget", metavar="TOKENS"),
    *LLM_FLAGS,
)
LOCOMO_FLAGS = (Shortcut("--k", "evaluation.ks", metavar="5,10"), Shortcut("--budget", "evaluation.budgets", metavar="500,1000"))
LME_FLAGS = (Shortcut("--granularity", "evaluation.granularities", metavar="session,turn"), Shortcut("--corpus", "evaluation.corpus"))


def cmd_eval(args: argparse.Namespace) -> int:
    from seem_dagster.config import ConfigError
    from seem_dagster.evaluation.run import EvalRun, run_evaluation
    from seem_dagster.ingest import InputError

    flags = EVAL_FLAGS + (LOCOMO_FLAGS if args.benchmark == "locomo" else LME_FLAGS)
    try:
        resolved = _resolve(args, flags)
        summary = run_evaluation(EvalRun(benchmark=args.benchmark, data=args.data, out=args.out, store=args.store,
                                         conversations=args.conversation, progress=not args.quiet), resolved)
    except (ConfigError, InputError, ValueError) as err:
        return _fail(str(err), EXIT_INPUT)
    except RuntimeError as err:
        return _fail(str(err), EXIT_RUN)
    print(summary)
    return 0


def cmd_config_show(args: argparse.Namespace) -> int:
    from seem_dagster.config import ConfigError

    try:
        resolved = _resolve(args)
    except ConfigError as err:
        return _fail(str(err), EXIT_INPUT)
    print(resolved.show(args.format, describe=args.describe), end="")
    return 0


def parser() -> argparse.ArgumentParser:
    from seem_dagster.ingest import FORMATS

    p = argparse.ArgumentParser(prog="seem", description="SEEM memory for conversational agents, built with Dagster.")
    sub = p.add_subparsers(dest="command", required=True)

    b = sub.add_parser("build", help="ingest an input file and materialize every memory asset of its conversations")
    b.add_argument("--input", required=True, help="LoCoMo JSON, LongMemEval JSON or JSONL chat log")
    b.add_argument("--format", choices=FORMATS, help="input format (detected when omitted)")
    b.add_argument("--conversation", action="append", metavar="ID", help="only this conversation (repeatable)")
    b.add_argument("--questions", help="JSONL questions for a JSONL input (see README)")
    b.add_argument("--quiet", action="store_true", help="no progress bar")
    b.add_argument("--rebuild", action="store_true", help="build every conversation, even one whose input is unchanged and "
                   "whose published memory was made with the current settings and code (skipped otherwise)")
    _add_config_flags(b, BUILD_FLAGS)
    b.set_defaults(func=cmd_build)

    q = sub.add_parser("query", help="retrieve the evidence for a question from a built conversation")
    q.add_argument("question")
    q.add_argument("--conversation", required=True, metavar="ID")
    q.add_argument("--date", help="the question's date (ISO); relative dates in the question resolve against it")
    q.add_argument("--as-of", metavar="DATE", help="answer from the memory as it stood on DATE: later turns left out, "
                   "property values as they held then (--date defaults to it)")
    q.add_argument("--json", action="store_true", help="print JSON: passages with passage_id, source_ref, text, timestamp, score, reason")
    _add_config_flags(q, QUERY_FLAGS)
    q.set_defaults(func=cmd_query)

    sq = sub.add_parser("sql", help="run one read-only SELECT over the memory's tables (DuckDB views)")
    sq.add_argument("query", nargs="?", help="one SELECT or WITH ... SELECT statement; views are named after the tables")
    sq.add_argument("--conversation", metavar="ID", help="one conversation (default: every built conversation in the store)")
    sq.add_argument("--schema", action="store_true", help="list the views, their columns and row counts")
    sq.add_argument("--format", choices=("table", "csv", "json"), default="table", help="output format")
    _add_config_flags(sq, SQL_FLAGS)
    sq.set_defaults(func=cmd_sql)

    m = sub.add_parser("mcp", help="serve the memory tools (schema, entity_lookup, property_search, sql, search) over MCP "
                                   "(stdio, or streamable HTTP with --http)")
    m.add_argument("--conversation", metavar="ID", help="the conversation tools use by default (and the only one `sql` sees); "
                                                        "with --http, for the open loopback server only")
    m.add_argument("--http", metavar="HOST:PORT", help="serve over HTTP at /mcp (health at /health); beyond loopback it needs "
                                                       "--tokens-file (agent.tokens_file)")
    _add_config_flags(m, MCP_FLAGS)
    m.set_defaults(func=cmd_mcp)

    tk = sub.add_parser("tokens", help="bearer tokens for `seem mcp --http`, each scoped to conversations (add, revoke, list)")
    tk_sub = tk.add_subparsers(dest="action", required=True)
    tk_add = tk_sub.add_parser("add", help="make a token; it is printed once, as the last line")
    tk_add.add_argument("--conversations", metavar="A,B", help="the conversations it reads (comma-separated)")
    tk_add.add_argument("--prefix", help="it also reads every conversation whose id starts with this")
    tk_add.add_argument("--name", help="a note for whom it is")
    tk_add.add_argument("--write", action="store_true", help="it may also add turns to its conversations (the `remember` tool, "
                                                             "offered when agent.allow_add is on); without it, read only")
    tk_rev = tk_sub.add_parser("revoke", help="remove a token by its id (tok_...)")
    tk_rev.add_argument("id")
    tk_list = tk_sub.add_parser("list", help="the tokens' ids, scopes and notes (no hashes)")
    for action in (tk_add, tk_rev, tk_list):
        _add_config_flags(action, TOKENS_FLAGS)
        action.set_defaults(func=cmd_tokens)

    a = sub.add_parser("ask", help="answer a question with a tool-using model over the memory tools (--agent)")
    a.add_argument("question")
    a.add_argument("--conversation", metavar="ID", help="the conversation (default: the store's only one)")
    a.add_argument("--agent", action="store_true", help="let the model call schema, entity_lookup, property_search, sql and search")
    a.add_argument("--date", help="the question's date (ISO); default the date of the last turn")
    a.add_argument("--json", action="store_true", help="print JSON: the answer, every model call and every tool call with its result")
    _add_config_flags(a, ASK_FLAGS)
    a.set_defaults(func=cmd_ask)

    f = sub.add_parser("forget", help="forget turns of a conversation: from the memory, every cache, older build and log, "
                       "and the Dagster instance")
    f.add_argument("--conversation", required=True, metavar="ID")
    f.add_argument("--turn", action="append", metavar="ID", help="a turn by the id its input gave it (D1:3, a JSONL id) or its "
                   "passage id (repeatable)")
    f.add_argument("--session", metavar="ID", help="the turns of this session")
    f.add_argument("--speaker", metavar="NAME", help="the turns of this speaker")
    f.add_argument("--before", metavar="DATE", help="the turns said before this ISO date or date-time")
    f.add_argument("--json", action="store_true", help="print what was removed as JSON")
    _add_config_flags(f, (STORE,))
    f.set_defaults(func=cmd_forget)

    d = sub.add_parser("demo", help="build the bundled sample end to end and show what the memory holds")
    _add_config_flags(d, (STORE,))
    d.set_defaults(func=cmd_demo)

    ev = sub.add_parser("eval", help="measure retrieval of every method on LoCoMo or LongMemEval")
    bench = ev.add_subparsers(dest="benchmark", required=True)
    for name, helptext, extra in (("locomo", "LoCoMo JSON (dev file or the full ten conversations)", LOCOMO_FLAGS),
                                  ("longmemeval", "LongMemEval JSON (dev file or a full release file)", LME_FLAGS)):
        e = bench.add_parser(name, help=helptext)
        e.add_argument("--data", required=True, help=helptext)
        e.add_argument("--out", required=True, help="folder for results.json, results.md and the plots")
        e.add_argument("--store", help="where the memories are built and kept between runs (default: OUT/store)")
        e.add_argument("--conversation", action="append", metavar="ID", help="only this conversation/question (repeatable)")
        e.add_argument("--quiet", action="store_true", help="no progress bars")
        _add_config_flags(e, EVAL_FLAGS + extra)
        e.set_defaults(func=cmd_eval)

    c = sub.add_parser("config", help="the configuration tree")
    csub = c.add_subparsers(dest="config_command", required=True)
    show = csub.add_parser("show", help="print every setting as resolved, with where its value came from")
    show.add_argument("--format", choices=("toml", "json"), default="toml", help="toml (with sources as comments) or json")
    show.add_argument("--describe", action="store_true", help="a line of description above each setting")
    _add_config_flags(show)
    show.set_defaults(func=cmd_config_show)
    return p


def _igraph_without_matplotlib() -> None:
    """Import igraph with matplotlib hidden: igraph imports matplotlib.pyplot for its drawing (0.4-0.5 s
    of a one-shot `seem query`), and no command here draws a graph. A later `import matplotlib` (the
    evaluation's plots) works as usual; igraph's own drawing stays off in this process only."""
    if "igraph" in sys.modules or "matplotlib" in sys.modules:
        return
    sys.modules["matplotlib"] = None  # type: ignore[assignment]
    try:
        import igraph  # noqa: F401
    finally:
        if sys.modules.get("matplotlib", 0) is None:
            del sys.modules["matplotlib"]


def main(argv: list[str] | None = None) -> int:
    from seem_dagster import interrupts

    args = parser().parse_args(argv)
    _igraph_without_matplotlib()
    interrupts.install()  # SIGINT and SIGTERM stop the command promptly, never half-way through a publish
    try:
        return args.func(args)
    except interrupts.Interrupted as err:
        return _fail(f"{err}; stopped", err.exit_code)
    except KeyboardInterrupt:
        return _fail("interrupted; stopped", 130)
    except BrokenPipeError:  # the reader of our output went away (`| head`): nothing more to say
        sys.stdout = open(os.devnull, "w")
        return 141
    except Exception as err:
        run_events = sys.modules.get("seem_dagster.defs.run_events")  # loaded by any command that builds
        if run_events is not None and isinstance(err, run_events.RunLogError):  # a failed run whose log found no room
            return _fail(str(err), EXIT_RUN)
        if not type(err).__module__.startswith(OBJECT_STORE_CLIENTS):
            raise
        # An object store that refused or could not be reached: one line, and where credentials come from.
        first = (str(err).strip().splitlines() or [""])[0]
        return _fail(f"object store: {type(err).__name__}: {first} ({OBJECT_STORE_HINT})", EXIT_RUN)


# The clients of an s3:// store (s3fs over aiobotocore over botocore); their errors name no secret.
OBJECT_STORE_CLIENTS = ("botocore", "aiobotocore", "s3fs")
OBJECT_STORE_HINT = ("S3 credentials come from the environment only: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or "
                     "AWS_PROFILE; AWS_ENDPOINT_URL for an S3-compatible server")


def run() -> None:
    """The ``seem`` command: ``main``, then the process ends without the C++ runtime's teardown.

    Every write is durable (fsynced, published) before ``main`` returns. What is left at interpreter
    exit is the native libraries' static destructors, and Arrow's thread pool can abort there when a
    Parquet worker thread is still winding down ("terminate called without an active exception",
    exit -6: apache/arrow#34314), seen once in CI after a build had printed its result. So the exit
    handlers Python would run (logging, temporary folders, multiprocessing's children, Dagster's
    instance) run here, the output is flushed, and the process ends with ``os._exit``."""
    import atexit

    code = main()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError):  # a reader that went away, or a stream already closed
            code = code or 141
    os._exit(0 if code is None else code)


if __name__ == "__main__":
    run()
