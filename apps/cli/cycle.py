"""The learning cycle and one command per stage, all calling `reflexmem.operations`.

`reflexmem cycle` runs every stage in order, directly or (`--flow`) as the Prefect
flow `daily_cycle`; `settle`, `mature`, `reflect`, `episodes` and `distil` run one stage
(evaluation and promotion are under `reflexmem eval`). Each prints its report as JSON.
"""

from __future__ import annotations

import sys
from contextlib import nullcontext
from pathlib import Path
from typing import Annotated, Any

import typer

from apps.cli.common import app, console, emit, open_resources, parse_as_of
from reflexmem.settings import Settings

AsOf = Annotated[
    str | None,
    typer.Option("--as-of", help="ISO time the cycle judges at (default: the newest bar)."),
]
Roles = Annotated[list[str] | None, typer.Option("--role", help="Only these roles.")]
Json = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]


def _show(data: Any, as_json: bool) -> None:
    from reflexmem.operations.cycle import plain

    emit(plain(data), as_json)


@app.command("cycle")
def cycle_cmd(
    as_of: AsOf = None,
    profile: Annotated[str | None, typer.Option(help="Evaluation profile.")] = None,
    version: Annotated[int | None, typer.Option(help="Profile version.")] = None,
    role: Roles = None,
    drop: Annotated[
        Path | None, typer.Option(help="Ingest the files of this folder first.")
    ] = None,
    flow: Annotated[bool, typer.Option("--flow/--direct", help="Run as a Prefect flow.")] = False,
    as_json: Json = False,
) -> None:
    """Run the whole learning cycle once: intake, maturation, reflection, memory, skills."""
    when = parse_as_of(as_of)
    if flow:
        from flows.cycle import daily_cycle

        settings = Settings().pinned()
        open_resources(settings)  # fail fast (exit 2) on an unmigrated ledger
        flow_report = daily_cycle(
            settings.resolved_database_url,
            settings.resolved_tracking_uri,
            str(settings.home),
            as_of=when,
            profile=profile,
            version=version,
            roles=role,
            drop_dir=None if drop is None else str(drop.resolve()),
        )
        emit(flow_report, as_json)
        return
    from reflexmem.operations.cycle import CycleParams, run_cycle
    from reflexmem.operations.runner import DirectRunner

    params = CycleParams(
        as_of=when,
        profile=profile,
        version=version,
        roles=tuple(role) if role else None,
        drop=drop,
    )
    status = nullcontext() if as_json else console.status("running the learning cycle")
    with status:
        report = run_cycle(DirectRunner(open_resources()), params)
    _show(report, as_json)


@app.command("settle")
def settle_cmd(as_of: AsOf = None, as_json: Json = False) -> None:
    """Settle open positions whose horizon the known prices cover."""
    from reflexmem.operations import maturation

    res = open_resources()
    plan = maturation.plan(res, parse_as_of(as_of))
    _show(maturation.settle(res, plan.as_of), as_json)


@app.command("mature")
def mature_cmd(as_of: AsOf = None, as_json: Json = False) -> None:
    """Move due, settled cases to eligible; keep the rest pending with their reason."""
    from reflexmem.operations import maturation

    res = open_resources()
    plan = maturation.plan(res, parse_as_of(as_of))
    _show(maturation.mature(res, plan.as_of), as_json)


@app.command("reflect")
def reflect_cmd(role: Roles = None, as_json: Json = False) -> None:
    """Reflect on matured cases with the configured reflector (REFLEX_LLM_*)."""
    from reflexmem.operations import maturation
    from reflexmem.operations.cycle import run_reflection
    from reflexmem.operations.runner import DirectRunner

    res = open_resources()
    roles = maturation.plan(res, roles=role).roles
    _show([r.as_row() for r in run_reflection(DirectRunner(res), roles)], as_json)


@app.command("episodes")
def episodes_cmd(role: Roles = None, as_json: Json = False) -> None:
    """Record reflected cases as episodes of their role's memory (bandit credit included)."""
    from reflexmem.operations import maturation, memory

    res = open_resources()
    roles = maturation.plan(res, roles=role).roles
    _show([memory.record_episodes(res, r) for r in roles], as_json)


@app.command("distil")
def distil_cmd(
    namespace: Annotated[
        list[str] | None, typer.Option(help="Only these namespaces (default: every due one).")
    ] = None,
    as_json: Json = False,
) -> None:
    """Distil every due window of ten episodes into semantic patterns and rules."""
    from reflexmem.operations import memory

    res = open_resources()
    names = namespace or memory.namespaces_due(res)
    _show([memory.distil(res, ns) for ns in names], as_json)


@app.command("serve")
def serve_cmd() -> None:
    """Serve the scheduled deployments against the Prefect server at PREFECT_API_URL."""
    from apps.deploy.deployments import serve

    settings = Settings()
    open_resources(settings)
    if "PREFECT_API_URL" not in __import__("os").environ:
        sys.stderr.write("PREFECT_API_URL is not set: start `prefect server start` first\n")
        raise typer.Exit(2)
    serve(settings)
