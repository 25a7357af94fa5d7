"""Agent-facing services: `reflexmem api` (HTTP) and `reflexmem mcp` (MCP over stdio).

Both serve the same tools (`apps/service/agent_tools.py`) over one set of resources, in the
process's frozen role-memory mode: recall exists only in active mode.
"""

from __future__ import annotations

import copy
from typing import Annotated, Any

import typer

from apps.cli.common import app, err, open_resources
from reflexmem.settings import Settings


@app.command("api")
def api_cmd(
    host: Annotated[str | None, typer.Option(help="Interface (default REFLEX_API_HOST).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (default REFLEX_API_PORT).")] = None,
    workers: Annotated[
        int,
        typer.Option(
            envvar="REFLEX_API_WORKERS",
            help="Server processes (PostgreSQL only: SQLite serialises writes in one).",
        ),
    ] = 1,
) -> None:
    """Serve the agent HTTP API (bearer token REFLEX_API_TOKEN required; see docs/api.md)."""
    import uvicorn

    from apps.service.api import create_app
    from reflexmem.settings import runtime_mode

    settings = Settings()
    if settings.api_token is None or not settings.api_token.get_secret_value().strip():
        err.print("[red]cannot start:[/red] set REFLEX_API_TOKEN (the API never runs open)")
        raise typer.Exit(2)
    if workers < 1:
        err.print(f"[red]cannot start:[/red] --workers must be at least 1, got {workers}")
        raise typer.Exit(2)
    res = open_resources(settings)
    bind_host = host or settings.api_host
    bind_port = settings.api_port if port is None else port
    if workers > 1:
        if res.engine.dialect.name != "postgresql":
            err.print(
                "[red]cannot start:[/red] --workers > 1 needs PostgreSQL: on SQLite one "
                "process serialises the writes (REFLEX_DATABASE_URL)"
            )
            raise typer.Exit(2)
        res.engine.dispose()
        # Each worker process builds its own app and connection pool from the settings.
        uvicorn.run(
            "apps.service.api:app_from_settings",
            factory=True,
            workers=workers,
            log_level="info",
            log_config=_log_config(),
            host=bind_host,
            port=bind_port,
        )
        return
    application = create_app(res, settings, mode=runtime_mode())
    uvicorn.run(
        application, host=bind_host, port=bind_port, log_level="info", log_config=_log_config()
    )


def _log_config() -> dict[str, Any]:
    """The logging of uvicorn, with an access formatter that reads the redacted message.

    The process's redacting filter (`reflexmem.redact`) formats every record and clears
    its arguments; uvicorn's own access formatter unpacks those arguments and would
    fail on every request, so access lines use the plain message instead.
    """
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config["formatters"]["access"] = {"format": "%(asctime)s %(levelname)s %(message)s"}
    return config


@app.command("mcp")
def mcp_cmd() -> None:
    """Serve the agent tools as an MCP server over stdio (for LLM agents)."""
    from apps.service.mcp_server import build_mcp
    from reflexmem.settings import runtime_mode

    server = build_mcp(open_resources(Settings()), runtime_mode())
    server.run("stdio")
