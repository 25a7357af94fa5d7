"""Ledger commands: schema, ingest, admission, previews and the demo."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from apps.cli.common import (
    app,
    console,
    db_app,
    err,
    open_resources,
    preview_app,
    print_admission,
)
from reflexmem.settings import Settings


@db_app.command("upgrade")
def db_upgrade() -> None:
    """Create or migrate the ledger schema to the newest revision (the only command that does)."""
    from adapters import migrate
    from adapters.db import make_engine

    settings = Settings()
    if settings.backend == "sqlite":
        settings.home.mkdir(parents=True, exist_ok=True)
    engine = make_engine(settings.resolved_database_url)
    try:
        migrate.upgrade(engine)
        console.print(f"ledger at revision {migrate.current_revision(engine)} ({settings.backend})")
    finally:
        engine.dispose()


@db_app.command("drop-demo")
def db_drop_demo() -> None:
    """Delete the embedded ledger a previous demo made (never any other ledger)."""
    from apps.demo.fresh import NotDemoLedger, drop_demo_ledger

    try:
        console.print(drop_demo_ledger(Settings()))
    except NotDemoLedger as exc:
        err.print(f"[red]refused:[/red] {exc}")
        raise typer.Exit(2) from exc


@app.command()
def ingest(
    paths: Annotated[
        list[Path], typer.Argument(help="Parquet, CSV or JSONL ledger or bars files.")
    ],
    kind: Annotated[
        str | None, typer.Option(help="Kind of every file (e.g. bars), if names don't tell.")
    ] = None,
    admit: Annotated[bool, typer.Option("--admit/--no-admit", help="Run admission after.")] = False,
) -> None:
    """Load files in one transaction: unparseable input writes nothing, bad bars are quarantined."""
    from reflexmem.ingest.read import IngestError
    from reflexmem.operations import intake

    res = open_resources()
    try:
        with console.status(f"validating and loading {len(paths)} file(s)"):
            report = intake.ingest(res, paths, kind)
    except IngestError as exc:
        err.print(f"[red]ingest failed, nothing written:[/red] {exc}", soft_wrap=True)
        raise typer.Exit(2) from exc
    for path in report.skipped_files:
        console.print(f"unchanged (ingested before): {path}")
    for k in report.kinds:
        line = (
            f"{k}: {report.added.get(k, 0)} new rows, "
            f"{report.unchanged_rows.get(k, 0)} already stored"
        )
        if k in report.quarantined:
            line += f", {report.quarantined[k]} quarantined"
        console.print(line)
    if report.quarantine_reasons:
        reasons = ", ".join(f"{r} {n}" for r, n in sorted(report.quarantine_reasons.items()))
        console.print(f"quarantined by reason: {reasons}")
    if admit:
        print_admission(intake.admit(res))


@app.command("admit")
def admit_cmd(
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Admit every not-yet-admitted execution (fail-closed, guarded by Great Expectations).

    Batches are serialised: one that waits `REFLEX_ADMISSION_LOCK_WAIT_S` for another
    to finish exits 0 saying "another admission is running".
    """
    from dataclasses import asdict

    from apps.cli.common import emit
    from reflexmem.operations import intake

    result = intake.admit(open_resources())
    if as_json:
        emit(asdict(result), as_json=True)
        return
    print_admission(result)


@preview_app.command("consume")
def preview_consume(preview_id: str, decision_id: str) -> None:
    """Consume a manual preview for a decision; a refused attempt is kept in quarantine."""
    from reflexmem.operations import intake

    report = intake.consume(open_resources(), preview_id, decision_id)
    if not report.consumed:
        err.print(f"[red]refused (kept in quarantine):[/red] {report.reason}")
        raise typer.Exit(1)
    console.print(f"preview {preview_id} consumed by {decision_id}")


@app.command()
def demo(
    rows: Annotated[int, typer.Option(help="Decisions in the generated stream.")] = 20_000,
) -> None:
    """Run the main job on the embedded defaults, end to end (after `db upgrade`)."""
    import os

    from apps.demo.fresh import mark_if_new
    from apps.demo.main import run_demo
    from apps.deploy.stack_live import paused_schedules

    settings = Settings()
    res = open_resources(settings)
    mark_if_new(settings, res.engine)
    # on a stack, its schedules wait: the demo runs the cycle at its own clocks
    with paused_schedules(os.environ.get("PREFECT_API_URL")) as paused:
        if paused:
            console.print(f"paused {len(paused)} scheduled deployments for the demo's length")
        run_demo(settings, res, rows=rows, console=console)
