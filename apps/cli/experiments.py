"""REFLEX experiments that must come out exactly (docs/design.md §11): `experiment b`."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from apps.cli.common import app, console, emit

experiment_app = typer.Typer(no_args_is_help=True, help="Design experiments, reproduced.")
app.add_typer(experiment_app, name="experiment")


@experiment_app.command("b")
def experiment_b_cmd(
    seed: Annotated[int, typer.Option(help="Seed of the selection loop's task sets.")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Experiment B: the three candidates in two environments, then the selection loop."""
    from reflexmem.structures.experiment_b import run_experiment_b

    result = run_experiment_b(seed)
    if as_json:
        emit(result, True)
        return
    table = Table(title="Experiment B (cost = stored edges + unnecessarily activated areas)")
    for col in ("environment", "candidate", "solved", "stored edges", "unneeded", "cost"):
        table.add_column(col, justify="left" if col in ("environment", "candidate") else "right")
    for r in result["rows"]:
        table.add_row(
            r["environment"],
            r["candidate"],
            f"{r['solved']}/{r['tasks']}",
            str(r["stored_edges"]),
            str(r["unneeded_activations"]),
            str(r["cost"]),
        )
    console.print(table)
    for env, name in result["selected"].items():
        steps = result["selection"][env]["operators"]
        console.print(f"selection loop from all_shared, {env}: [bold]{name}[/bold] via")
        for step in steps:
            console.print(f"  {step}")
