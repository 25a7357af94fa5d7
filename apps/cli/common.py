"""What every command module shares: the consoles, the JSON emitter, small renderers."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from datetime import datetime

    from reflexmem.admission.admit import AdmissionResult
    from reflexmem.operations.resources import Resources
    from reflexmem.settings import Settings

app = typer.Typer(no_args_is_help=True, add_completion=False)
db_app = typer.Typer(no_args_is_help=True, help="Ledger schema.")
preview_app = typer.Typer(no_args_is_help=True, help="Manual previews.")
bench_app = typer.Typer(no_args_is_help=True, help="Benchmarks that print JSON.")
eval_app = typer.Typer(no_args_is_help=True, help="Evaluation runs: run, replay, promote.")
app.add_typer(db_app, name="db")
app.add_typer(preview_app, name="preview")
app.add_typer(bench_app, name="bench")
app.add_typer(eval_app, name="eval")
console = Console()
err = Console(stderr=True)

AsOf = Annotated[
    str | None,
    typer.Option(
        "--as-of",
        help="Valid time (the cycle's clock, ISO, UTC if naive): only what was valid "
        "(decided and matured, learned on the episodes valid) by then.",
    ),
]
KnownAt = Annotated[
    str | None,
    typer.Option(
        "--known-at", help="Recorded time (wall clock, ISO): only what was written by then."
    ),
]


def check_backend(backend: str) -> None:
    """Exit 2 unless `backend` is one of the two supported ledgers."""
    if backend not in ("sqlite", "postgres"):
        err.print("--backend must be sqlite or postgres")
        raise typer.Exit(2)


def emit(result: dict[str, Any], as_json: bool) -> None:
    """One JSON object on stdout (for scripts), or pretty JSON for people."""
    if as_json:
        sys.stdout.write(json.dumps(result) + "\n")
    else:
        console.print_json(json.dumps(result))


def counts_table(title: str, counts: dict[str, int]) -> Table:
    """A two-column table of counts by reason."""
    table = Table(title=title)
    table.add_column("reason")
    table.add_column("rows", justify="right")
    for key, value in counts.items():
        table.add_row(key, str(value))
    return table


def print_admission(result: AdmissionResult) -> None:
    """Print one admission batch's verdict table (or that another batch held the lock)."""
    from apps.render import admission_table

    if result.busy:
        console.print("another admission is running; nothing judged (run `reflexmem admit` again)")
        return
    console.print(admission_table(result))


def open_resources(settings: Settings | None = None) -> Resources:
    """The resources for these settings, or exit 2 with what the user must fix.

    A ledger that is not migrated to the code's revision names `reflexmem db upgrade`;
    a setting that cannot be satisfied (an unknown embedder, a price panel that does
    not exist, an incomplete model configuration) names the setting.
    """
    from adapters.migrate import SchemaNotCurrent
    from adapters.resources import build_resources
    from reflexmem.redact import redact
    from reflexmem.settings import Settings

    try:
        return build_resources(settings or Settings())
    except SchemaNotCurrent as exc:
        err.print(f"[red]{redact(str(exc))}[/red]", soft_wrap=True)
        raise typer.Exit(2) from exc
    except (ValueError, OSError) as exc:
        err.print(f"[red]cannot start:[/red] {redact(str(exc))}", soft_wrap=True)
        raise typer.Exit(2) from exc


def parse_time(raw: str, option: str) -> datetime:
    """An ISO date or timestamp option as an aware UTC time (naive means UTC); exit 2 if not."""
    from datetime import datetime

    from reflexmem.ledger.sqlio import to_utc

    try:
        when = datetime.fromisoformat(raw)
    except ValueError as exc:
        err.print(f"{option} must be an ISO timestamp: {exc}")
        raise typer.Exit(2) from exc
    return to_utc(when)


def parse_as_of(raw: str | None, option: str = "--as-of") -> datetime | None:
    """A time option such as `--as-of` (`parse_time`), or None when it was not given."""
    return None if raw is None else parse_time(raw, option)
