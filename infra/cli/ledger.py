"""Ledger commands: schema, ingest, admission, previews, doctor and the demo."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from infra.cli.common import (
    app,
    console,
    counts_table,
    db_app,
    err,
    preview_app,
    print_admission,
)
from reflexmem.settings import Settings


@db_app.command("upgrade")
def db_upgrade() -> None:
    """Create or migrate the ledger schema to the newest revision."""
    from infra import migrate
    from infra.services import ready_engine

    settings = Settings()
    engine = ready_engine(settings)
    console.print(f"ledger at revision {migrate.current_revision(engine)} ({settings.backend})")


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
    from infra.services import ready_engine, run_admission, run_ingest
    from reflexmem.ingest.read import IngestError

    settings = Settings()
    engine = ready_engine(settings)
    try:
        with console.status(f"validating and loading {len(paths)} file(s)"):
            report = run_ingest(engine, paths, kind)
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
        print_admission(run_admission(engine, settings))


@app.command("admit")
def admit_cmd() -> None:
    """Admit every not-yet-admitted execution (fail-closed, guarded by Great Expectations)."""
    from infra.services import ready_engine, run_admission

    settings = Settings()
    print_admission(run_admission(ready_engine(settings), settings))


@preview_app.command("consume")
def preview_consume(preview_id: str, decision_id: str) -> None:
    """Consume a manual preview for a decision; a second consumption is refused."""
    from infra.services import ready_engine
    from reflexmem.ledger.previews import PreviewError, consume_preview

    engine = ready_engine(Settings())
    try:
        with engine.begin() as conn:
            consume_preview(conn, preview_id, decision_id)
    except PreviewError as exc:
        err.print(f"[red]refused:[/red] {exc}")
        raise typer.Exit(1) from exc
    console.print(f"preview {preview_id} consumed by {decision_id}")


@app.command()
def doctor() -> None:
    """Check the store: reachable, migrated, registry valid; show mode and case counts."""
    from infra.doctor import run_doctor

    report = run_doctor(Settings())
    for check in report.checks:
        mark = "[green]ok[/green]" if check.ok else "[red]FAIL[/red]"
        console.print(f"{mark}  {check.name}: {check.detail}")
    for title, counts in report.tables.items():
        if counts:
            console.print(counts_table(title, counts))
    if not report.healthy:
        raise typer.Exit(1)


@app.command()
def demo(
    rows: Annotated[int, typer.Option(help="Decisions in the generated stream.")] = 5000,
) -> None:
    """Run the main job on the embedded defaults, end to end."""
    from infra.demo import run_demo

    run_demo(Settings(), rows=rows, console=console)
