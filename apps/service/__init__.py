"""Agent services: the HTTP API and the MCP server over one set of agent tools."""
