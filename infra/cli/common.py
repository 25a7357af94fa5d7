"""What every command module shares: the consoles, the JSON emitter, small renderers."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from reflexmem.admission.admit import AdmissionResult

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
    """Print one admission batch's verdict table."""
    from infra.render import admission_table

    console.print(admission_table(result))
