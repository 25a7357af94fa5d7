"""Lineage review on the command line: one decision's chain, the HTML report, the registry.

`reflexmem lineage DECISION_ID` walks a decision to every step of its chain (exit 1 for
a decision the ledger does not have), at a valid time (`--as-of`) and a recorded time
(`--known-at`) if asked; `reflexmem report` writes one self-contained HTML
page of the store; `reflexmem registry sync` registers the evaluation profiles and role
skill files as MLflow model versions (the trackers also do it on first use).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from apps.cli.common import AsOf, KnownAt, app, console, emit, err, open_resources, parse_as_of
from reflexmem.settings import Settings

registry_app = typer.Typer(no_args_is_help=True, help="Versioned definitions in MLflow.")
app.add_typer(registry_app, name="registry")


def _summary(step: dict[str, object]) -> str:
    keys = ("state", "outcome_class", "status", "profile_version", "is_primary", "text")
    parts = [f"{k}={step[k]}" for k in keys if step.get(k) not in (None, "")]
    return escape(", ".join(parts))[:160]


def _when(value: str | None) -> str:
    return "-" if value is None else value[:19].replace("T", " ")


@app.command("lineage")
def lineage_cmd(
    decision_id: Annotated[str, typer.Argument(help="The decision to follow.")],
    as_of: AsOf = None,
    known_at: KnownAt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Print the whole chain of one decision, with MLflow run IDs and UI URLs."""
    from adapters.lineage import Links, trace
    from adapters.tracking.context import existing_client
    from reflexmem.recall.clocks import Clocks

    clocks = Clocks(parse_as_of(as_of), parse_as_of(known_at, "--known-at"))
    settings = Settings()
    res = open_resources(settings)
    links = Links(existing_client(settings.resolved_tracking_uri), settings.mlflow_ui_url)
    with res.engine.connect() as conn:
        found = trace(conn, decision_id, links, clocks)
    res.engine.dispose()
    if found is None:
        err.print(f"[red]unknown decision[/red] {escape(decision_id)}: not in the ledger")
        raise typer.Exit(1)
    data = found.as_json()
    if as_json:
        emit(data, True)
        return
    at = "".join(f" {k} {data[k]}" for k in ("as_of", "known_at") if data[k])
    table = Table(title=f"lineage of decision {escape(decision_id)}{escape(at)}")
    for col in ("step", "id", "valid", "recorded", "MLflow run", "details"):
        table.add_column(col)
    for step in data["steps"]:
        table.add_row(
            step["kind"],
            escape(str(step["id"])),
            _when(step["valid_at"]),
            _when(step["recorded_at"]),
            str(step["mlflow_run_id"] or "-"),
            _summary(step),
        )
    console.print(table)
    for step in data["steps"]:
        if step["url"]:
            console.print(f"{step['kind']:>10}: {step['url']}", soft_wrap=True, highlight=False)


@app.command("report")
def report_cmd(
    out: Annotated[
        Path | None, typer.Option(help="HTML file to write (default: REFLEX_HOME/report.html).")
    ] = None,
) -> None:
    """Write one self-contained HTML page: admission, maturity, evaluation, memory, benchmark."""
    from apps.report.page import write_report

    settings = Settings()
    res = open_resources(settings)
    path = write_report(settings, res.engine, out or settings.home / "report.html")
    res.engine.dispose()
    console.print(f"report: {path.resolve()}")


@registry_app.command("sync")
def registry_sync_cmd(
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Register every evaluation profile and role skill file as an MLflow model version."""
    from adapters.tracking.registry import sync_definitions

    settings = Settings()
    res = open_resources(settings)
    emit(sync_definitions(settings, res.registry), as_json)
