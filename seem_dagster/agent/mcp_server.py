"""`seem mcp`: the memory tools as an MCP server (the ``mcp`` SDK's MCPServer, stdio transport).

The tools' input schemas come from the signatures below (the SDK validates every call against
them); what each does and refuses is in ``tools.MemoryTools``. A refused call is an MCP tool error
whose text is the one-line reason. Nothing is printed on stdout but the protocol.
"""

from __future__ import annotations

import threading
from typing import Annotated

from pydantic import Field

from seem_dagster.agent.tools import MemoryTools, ToolInputError, as_json

INSTRUCTIONS = (
    "Memory of long conversations. Start with `schema` (views, columns, property names) or `search` (the turns that answer "
    "a question, with reasons). `entity_lookup` finds a person or thing by a fuzzy name with its current and past "
    "properties; `property_search` finds property values (as_of: what held on a day); `sql` runs one read-only SELECT. "
    "Properties keep history: valid_to NULL means the value still holds; a superseded value has its end."
)
Conversation = Annotated[str | None, Field(description="conversation id (default: the server's, or the store's only one)", max_length=200)]


def build_server(tools: MemoryTools):
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    server = MCPServer("seem-memory", instructions=INSTRUCTIONS, log_level="WARNING")
    # A client may send calls concurrently; the tools share one DuckDB connection and loaded
    # indexes, so they run one at a time.
    one_at_a_time = threading.Lock()

    def call(fn, *args, **kwargs) -> str:
        try:
            with one_at_a_time:
                return as_json(fn(*args, **kwargs))
        except ToolInputError as err:
            raise ToolError(str(err)) from None

    @server.tool(description="The memory's SQL views and their columns, the property names in use and the limits.")
    def schema() -> str:
        return call(tools.schema)

    @server.tool(description="Find an entity (person, place, thing) by a fuzzy name; returns its current and past properties "
                             "with when each held and the turn that said it.")
    def entity_lookup(name: Annotated[str, Field(description="the name, e.g. 'Mel' or 'support group'", max_length=200)],
                      conversation_id: Conversation = None) -> str:
        return call(tools.entity_lookup, name, conversation_id)

    @server.tool(description="Search property rows (entity, property, typed value, valid_from, valid_to, said_at, turn) by words, "
                             "entity or property name; as_of keeps what held on that day as known then.")
    def property_search(query: Annotated[str, Field(description="words to match in entity, property or value", max_length=2000)] = "",
                        entity: Annotated[str | None, Field(description="only this entity (part of its name)", max_length=200)] = None,
                        property: Annotated[str | None, Field(description="only this property, e.g. lives_in", max_length=200)] = None,
                        as_of: Annotated[str | None, Field(description="ISO date: what held that day", max_length=40)] = None,
                        limit: Annotated[int, Field(ge=1, le=200, description="rows at most")] = 20,
                        conversation_id: Conversation = None) -> str:
        return call(tools.property_search, query, entity, property, as_of, limit, conversation_id)

    @server.tool(description="Run one read-only SQL SELECT (DuckDB) over the memory's views (see `schema`); rows are capped "
                             "and slow queries stopped.")
    def sql(query: Annotated[str, Field(description="one SELECT or WITH ... SELECT statement", max_length=20000)]) -> str:
        return call(tools.sql, query)

    @server.tool(description="SEEM retrieval: the conversation turns that answer a question, ranked, each with the reason it is "
                             "there, plus the seed facts and the histories of the properties those turns state.")
    def search(question: Annotated[str, Field(description="the question", max_length=2000)],
               date: Annotated[str | None, Field(description="the question's date (ISO); relative dates resolve against it",
                                                 max_length=40)] = None,
               k: Annotated[int, Field(ge=1, le=50, description="turns to return")] = 10,
               conversation_id: Conversation = None) -> str:
        return call(tools.search, question, date, k, conversation_id)

    if tools.config.agent.allow_forget:
        @server.tool(description="Forget turns of the conversation: from the memory, every cache and older build, and the logs. "
                                 "Name the turns (their source_ref), a session, a speaker or a date before which to forget.")
        def forget(turns: Annotated[list[Annotated[str, Field(max_length=200)]] | None,
                                    Field(description="source_refs of the turns", max_length=1000)] = None,
                   session_id: Annotated[str | None, Field(description="every turn of this session", max_length=200)] = None,
                   speaker: Annotated[str | None, Field(description="every turn of this speaker", max_length=200)] = None,
                   before: Annotated[str | None, Field(description="ISO date: the turns said before it", max_length=40)] = None,
                   conversation_id: Conversation = None) -> str:
            return call(tools.forget, turns, session_id, speaker, before, conversation_id)

    return server


def serve(tools: MemoryTools) -> None:
    import logging

    # stderr is the server's log: keep the libraries' debug chatter out of it.
    for name in ("bm25s", "sentence_transformers", "httpx"):
        logging.getLogger(name).setLevel(logging.WARNING)
    try:
        build_server(tools).run("stdio")
    finally:
        tools.close()
