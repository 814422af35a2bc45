"""Agent tools over the memory (APEX-MEM's retrieval agent): schema, entity_lookup, property_search,
sql and search, served over MCP (``mcp_server``) and called by the tool-using answerer (``answerer``)."""
