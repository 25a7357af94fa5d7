"""Agent-facing services: `reflexmem api` (HTTP) and `reflexmem mcp` (MCP over stdio).

Both serve the same tools (`infra/agent_tools.py`) over one set of resources, in the
process's frozen role-memory mode: recall exists only in active mode.
"""

from __future__ import annotations

from typing import Annotated

import typer

from infra.cli.common import app, err, open_resources
from reflexmem.settings import Settings


@app.command("api")
def api_cmd(
    host: Annotated[str | None, typer.Option(help="Interface (default REFLEX_API_HOST).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (default REFLEX_API_PORT).")] = None,
) -> None:
    """Serve the agent HTTP API (bearer token REFLEX_API_TOKEN required; see docs/api.md)."""
    import uvicorn

    from infra.api import create_app
    from reflexmem.settings import runtime_mode

    settings = Settings()
    if settings.api_token is None or not settings.api_token.get_secret_value().strip():
        err.print("[red]cannot start:[/red] set REFLEX_API_TOKEN (the API never runs open)")
        raise typer.Exit(2)
    application = create_app(open_resources(settings), settings, mode=runtime_mode())
    uvicorn.run(
        application,
        host=host or settings.api_host,
        port=settings.api_port if port is None else port,
        log_level="info",
    )


@app.command("mcp")
def mcp_cmd() -> None:
    """Serve the agent tools as an MCP server over stdio (for LLM agents)."""
    from infra.mcp_server import build_mcp
    from reflexmem.settings import runtime_mode

    server = build_mcp(open_resources(Settings()), runtime_mode())
    server.run("stdio")
