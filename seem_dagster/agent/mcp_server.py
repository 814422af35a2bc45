"""`seem mcp`: the memory tools as an MCP server (the ``mcp`` SDK's MCPServer), on stdio or, through
``http_server.py``, on streamable HTTP.

The tools' input schemas come from the signatures below (the SDK validates every call against
them), and ``RefuseBadArguments`` first refuses, each in one line naming the argument
(``refused_arguments``): an argument no tool has (a misspelt ``conversation`` must not be answered
from the default conversation as if it had been heard); a value of another JSON type than its
schema's, never coerced (the SDK would read ``"k": "5"`` as 5 and ``true`` as 1); a string that is
no text (a lone surrogate); a date outside the supported ones (``ingest.dates``).
What each tool does and refuses is in ``tools.MemoryTools``. A refused call is an MCP tool error
whose text is the one-line reason. Calls run side by side in worker threads, at most
``agent.concurrent_calls`` at once, each answered with an error after ``agent.call_timeout_s``.
Nothing is printed on stdout but the protocol.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Annotated, Any

import anyio
from mcp.server.mcpserver import Context  # at module level: the tools' annotations name it
from pydantic import Field

from seem_dagster.agent.tools import MemoryTools, ToolInputError, as_json
from seem_dagster.ingest import dates
from seem_dagster.ingest.errors import json_type, text_problem

INSTRUCTIONS = (
    "Memory of long conversations. Start with `schema` (views, columns, property names) or `search` (the turns that answer "
    "a question, with reasons). `entity_lookup` finds a person or thing by a fuzzy name with its current and past "
    "properties; `property_search` finds property values (as_of: what held on a day); `sql` runs one read-only SELECT. "
    "Properties keep history: valid_to NULL means the value still holds; a superseded value has its end."
)
Conversation = Annotated[str | None, Field(description="conversation id (default: the server's, or the only one you can read)",
                                           max_length=200)]
# Writes rebuild the conversation (a Dagster run): they are not cut off at the call timeout.
UNTIMED = frozenset({"forget", "remember"})
# A turn as `Memory.add` takes it; its fields and their types are checked there, each refusal one line.
TurnArgument = dict[str, Annotated[str, Field(max_length=20000)] | None]
# The arguments that are dates (ISO text), of any tool.
DATE_ARGUMENTS = frozenset({"date", "as_of", "before"})


def unknown_arguments(tool: str, arguments: object, accepted: Mapping[str, frozenset[str]]) -> str | None:
    """Why a call's arguments are refused (not an object, or names no parameter of the tool has), else None."""
    if tool not in accepted:
        return None  # the SDK answers an unknown tool itself
    if arguments is None:
        return None
    if not isinstance(arguments, Mapping):
        return "arguments must be an object"
    extra = sorted(str(k)[:40] for k in arguments if k not in accepted[tool])
    if extra:
        return f"{tool} has no argument {', '.join(map(repr, extra[:5]))}; it takes: {', '.join(sorted(accepted[tool])) or 'none'}"
    return None


def _text_problem_in(value: object) -> str | None:
    """``text_problem`` of the first string in ``value`` (a string, or any JSON value around strings)."""
    if isinstance(value, str):
        return text_problem(value)
    parts = [*value.keys(), *value.values()] if isinstance(value, Mapping) else value if isinstance(value, list) else []
    return next((why for why in map(_text_problem_in, parts) if why is not None), None)


def unreadable_argument(tool: str, arguments: Mapping) -> str | None:
    """"<tool>: <argument>: not valid Unicode ..." for the first argument holding a string that is no
    text (a lone surrogate, which JSON's "\\ud800" alone decodes to), else None."""
    for name, value in arguments.items():
        why = _text_problem_in(value)
        if why is not None:
            return f"{tool}: {name}: {why}"
    return None


def refused_arguments(tool: str, arguments: object, schemas: Mapping[str, Mapping]) -> str | None:
    """Why a call's arguments are refused before the tool runs (``schemas``: each tool's input schema),
    else None: not an object, a name the tool lacks, a string that is no text, a value of another JSON
    type than its schema's (strictly: "5" is no integer, true no number, 5.0 no integer), or a date
    outside the supported ones. Bounds (lengths, ranges) are the SDK's to check, with its words."""
    why = unknown_arguments(tool, arguments, {name: frozenset(s.get("properties", {})) for name, s in schemas.items()})
    if why is not None or tool not in schemas or not arguments:
        return why
    why = unreadable_argument(tool, arguments)
    if why is not None:
        return why
    properties = schemas[tool].get("properties", {})
    for name, value in arguments.items():
        why = _type_problem(value, properties[name])
        if why is not None:
            return f"{tool}: {name}: {why}"
        if name in DATE_ARGUMENTS and isinstance(value, str):
            try:
                dates.parse_iso(value)
            except dates.DateOutOfRange as err:
                return f"{tool}: {name}: {err}"
            except ValueError:
                pass  # the tool says what is wrong with text that is no date
    return None


_JSON_TYPES = {"string": "string", "integer": "integer", "number": "number", "boolean": "boolean", "null": "null",
               "array": "array", "object": "object"}


def _type_problem(value: object, schema: Mapping) -> str | None:
    """Why ``value`` is not of the JSON type ``schema`` (or one of its ``anyOf``) gives, else None."""
    options = schema.get("anyOf") or [schema]
    if any(_fits(value, option) for option in options):
        return None
    wanted = [option.get("type") for option in options if option.get("type") in _JSON_TYPES]
    if isinstance(value, list):
        for option in options:
            if option.get("type") == "array":
                for i, item in enumerate(value):
                    why = _type_problem(item, option.get("items", {}))
                    if why is not None:
                        return f"item {i}: {why}"
    return f"expected {' or '.join(wanted) or 'another type'}, got {json_type(value)}"


def _fits(value: object, schema: Mapping) -> bool:
    kind = schema.get("type")
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "null":
        return value is None
    if kind == "array":
        return isinstance(value, list) and all(_type_problem(item, schema.get("items", {})) is None for item in value)
    if kind == "object":
        return isinstance(value, Mapping)
    return True  # a schema that names no type takes any value


class RefuseBadArguments:
    """MCP middleware: a tools/call whose arguments ``refused_arguments`` refuses gets a tool error."""

    def __init__(self, server):
        self.server = server
        self._schemas: dict[str, Mapping] | None = None

    async def schemas(self) -> dict[str, Mapping]:
        if self._schemas is None:
            self._schemas = {t.name: t.input_schema for t in await self.server.list_tools()}
        return self._schemas

    async def __call__(self, ctx, call_next):
        if ctx.method != "tools/call" or not isinstance(ctx.params, Mapping):
            return await call_next(ctx)
        tool = str(ctx.params.get("name"))[:80]
        why = refused_arguments(tool, ctx.params.get("arguments"), await self.schemas())
        if why is not None:
            return {"content": [{"type": "text", "text": why}], "isError": True}
        result = await call_next(ctx)
        if isinstance(result, dict) and result.get("isError") and result.get("content"):
            first = result["content"][0]
            if isinstance(first, dict) and "validation error" in first.get("text", "").split("\n")[0]:
                first["text"] = validation_line(tool, first["text"])
        return result


class Panicked(Exception):
    """A Rust library (polars, DuckDB's Arrow) panicked in a call."""


def _contained(work: Callable[[], Any]) -> Any:
    """``work()``, with a Rust panic (pyo3's PanicException, a BaseException: uncaught, it ends the
    server's task group and every later request of that process fails) made an error of this call alone."""
    try:
        return work()
    except Exception:
        raise
    except BaseException as err:
        if type(err).__name__ == "PanicException":
            raise Panicked(str(err)[:200]) from None
        raise


def validation_line(tool: str, text: str) -> str:
    """The SDK's report of arguments that fail the input schema (several lines, echoing the input,
    which may be megabytes) as one line: each argument and what is wrong with it."""
    lines = text.split("\n")[1:]
    problems = [f"{field.strip()[:40]}: {message.split(' [type=')[0].strip()}"
                for field, message in zip(lines, lines[1:]) if field and not field.startswith(" ") and message.startswith("  ")]
    return f"{tool}: " + ("; ".join(problems) or "the arguments do not fit its input schema")[:500]


def build_server(tools: MemoryTools, scope: Callable[[Any], MemoryTools] | None = None):
    """The MCP server over ``tools``. ``scope(ctx)``: the tools as the caller of one call may see them
    (the HTTP server's tenant); without it every call uses ``tools``."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    server = MCPServer("seem-memory", instructions=INSTRUCTIONS, log_level="WARNING")
    server.middleware.append(RefuseBadArguments(server))
    agent = tools.config.agent
    limiter = anyio.CapacityLimiter(agent.concurrent_calls)

    async def call(ctx: Context | None, name: str, *args) -> str:
        scoped = scope(ctx) if scope is not None else tools
        work = functools.partial(_contained, functools.partial(getattr(scoped, name), *args))
        try:
            if name in UNTIMED:
                result = await anyio.to_thread.run_sync(work, limiter=limiter)
            else:
                with anyio.fail_after(agent.call_timeout_s):
                    # A call past its time is answered now; its thread finishes in the background
                    # (a search cannot be interrupted, a SQL worker is stopped at sql.timeout_s).
                    result = await anyio.to_thread.run_sync(work, limiter=limiter, abandon_on_cancel=True)
        except TimeoutError:
            raise ToolError(f"{name} took longer than {agent.call_timeout_s:g} s (agent.call_timeout_s) and was answered "
                            "with this error") from None
        except ToolInputError as err:
            raise ToolError(str(err)) from None
        except Panicked:
            raise ToolError(f"{name} failed inside a library (it panicked); nothing changed, and other calls go on") from None
        return as_json(result)

    @server.tool(description="The memory's SQL views and their columns, the property names in use and the limits.")
    async def schema(ctx: Context) -> str:
        return await call(ctx, "schema")

    @server.tool(description="Find an entity (person, place, thing) by a fuzzy name; returns its current and past properties "
                             "with when each held and the turn that said it.")
    async def entity_lookup(name: Annotated[str, Field(description="the name, e.g. 'Mel' or 'support group'", max_length=200)],
                            ctx: Context, conversation_id: Conversation = None) -> str:
        return await call(ctx, "entity_lookup", name, conversation_id)

    @server.tool(description="Search property rows (entity, property, typed value, valid_from, valid_to, said_at, turn) by words, "
                             "entity or property name; as_of keeps what held on that day as known then.")
    async def property_search(ctx: Context,
                              query: Annotated[str, Field(description="words to match in entity, property or value", max_length=2000)] = "",
                              entity: Annotated[str | None, Field(description="only this entity (part of its name)", max_length=200)] = None,
                              property: Annotated[str | None, Field(description="only this property, e.g. lives_in", max_length=200)] = None,
                              as_of: Annotated[str | None, Field(description="ISO date: what held that day", max_length=40)] = None,
                              limit: Annotated[int, Field(ge=1, le=200, description="rows at most")] = 20,
                              conversation_id: Conversation = None) -> str:
        return await call(ctx, "property_search", query, entity, property, as_of, limit, conversation_id)

    @server.tool(description="Run one read-only SQL SELECT (DuckDB) over the memory's views (see `schema`); rows are capped, "
                             "and a query over its time or memory bound is stopped.")
    async def sql(query: Annotated[str, Field(description="one SELECT or WITH ... SELECT statement", max_length=20000)],
                  ctx: Context) -> str:
        return await call(ctx, "sql", query)

    @server.tool(description="SEEM retrieval: the conversation turns that answer a question, ranked, each with the reason it is "
                             "there, plus the seed facts and the histories of the properties those turns state.")
    async def search(question: Annotated[str, Field(description="the question", max_length=2000)], ctx: Context,
                     date: Annotated[str | None, Field(description="the question's date (ISO); relative dates resolve against it",
                                                       max_length=40)] = None,
                     k: Annotated[int, Field(ge=1, le=50, description="turns to return")] = 10,
                     conversation_id: Conversation = None) -> str:
        return await call(ctx, "search", question, date, k, conversation_id)

    if agent.allow_add:
        @server.tool(description="Remember turns of a conversation: each {speaker, text, timestamp (ISO), id (optional)}; "
                                 "they are searchable when this returns. A token writes only where it was granted to.")
        async def remember(ctx: Context,
                           turns: Annotated[list[TurnArgument], Field(description="the turns, oldest first", min_length=1,
                                                                      max_length=100)],
                           session_id: Annotated[str | None, Field(description="the session they belong to (default: their day)",
                                                                   max_length=200)] = None,
                           conversation_id: Conversation = None) -> str:
            return await call(ctx, "remember", turns, session_id, conversation_id)

    if agent.allow_forget:
        @server.tool(description="Forget turns of the conversation: from the memory, every cache and older build, and the logs. "
                                 "Name the turns (their source_ref), a session, a speaker or a date before which to forget.")
        async def forget(ctx: Context,
                         turns: Annotated[list[Annotated[str, Field(max_length=200)]] | None,
                                          Field(description="source_refs of the turns", max_length=1000)] = None,
                         session_id: Annotated[str | None, Field(description="every turn of this session", max_length=200)] = None,
                         speaker: Annotated[str | None, Field(description="every turn of this speaker", max_length=200)] = None,
                         before: Annotated[str | None, Field(description="ISO date: the turns said before it", max_length=40)] = None,
                         conversation_id: Conversation = None) -> str:
            return await call(ctx, "forget", turns, session_id, speaker, before, conversation_id)

    return server


def quiet_libraries() -> None:
    import logging

    # stderr is the server's log: keep the libraries' debug chatter out of it.
    for name in ("bm25s", "sentence_transformers", "httpx", "httpx2"):
        logging.getLogger(name).setLevel(logging.WARNING)


def serve(tools: MemoryTools) -> None:
    """stdio: one client, the operator's own (every conversation of the store)."""
    quiet_libraries()
    try:
        build_server(tools).run("stdio")
    finally:
        tools.close()
