"""Structure versions: check a file, mutate, search, show the current one, roll back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from apps.cli.common import app, console, emit, err

structures_app = typer.Typer(
    no_args_is_help=True, help="Structure G versions (docs/design.md §11)."
)
app.add_typer(structures_app, name="structures")


@structures_app.command("check")
def check_cmd(
    path: Annotated[Path, typer.Argument(help="Structure YAML file.")],
) -> None:
    """Validate a structure file against its stored parent; store it as a candidate."""
    from apps.cli.common import open_resources
    from reflexmem.structures.operations import admit_file
    from reflexmem.structures.refusals import StructureRefused

    try:
        s = admit_file(open_resources().engine, path)
    except StructureRefused as exc:
        for r in exc.refusals:
            err.print(f"[red]refused[/red] {r.source}: {r.field}: {r.check}: {r.reason}")
        raise typer.Exit(2) from exc
    console.print(f"{s.structure_id}: stored as a candidate (parent {s.parent_id})")


@structures_app.command("mutate")
def mutate_cmd(
    structure_id: Annotated[str, typer.Argument(help="A stored structure version.")],
    operator: Annotated[str, typer.Argument(help="split, merge, narrow_scope, delete_edge, ...")],
    args: Annotated[str, typer.Option(help="The operator's arguments as a JSON object.")] = "{}",
) -> None:
    """Apply one operator to a stored version; a widening child is refused and recorded."""
    from apps.cli.common import open_resources
    from reflexmem.structures.mutations import Step
    from reflexmem.structures.operations import mutate
    from reflexmem.structures.refusals import StructureRefused

    try:
        m = mutate(open_resources().engine, structure_id, Step(operator, json.loads(args)))
    except StructureRefused as exc:
        for r in exc.refusals:
            err.print(f"[red]refused[/red] {r.source}: {r.field}: {r.check}: {r.reason}")
        raise typer.Exit(2) from exc
    console.print(f"{m.child.structure_id}: stored as a candidate ({m.operator})")


@structures_app.command("search")
def search_cmd(
    environment: Annotated[str, typer.Option(help="composite or independent.")] = "composite",
    seed: Annotated[int, typer.Option(help="Seed of the task sets.")] = 0,
    cost_model: Annotated[str, typer.Option(help="experiment-b or default.")] = "experiment-b",
    scope: Annotated[str, typer.Option(help="Bundle scope.")] = "office",
    flow: Annotated[bool, typer.Option("--flow/--direct", help="Run as a Prefect flow.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Run the selection loop from the active structure; register and activate the winner."""
    from apps.cli.common import open_resources
    from reflexmem.operations.runner import DirectRunner
    from reflexmem.operations.structures import SearchParams, run_structure_search

    res = open_resources()  # exit 2 on an unmigrated ledger
    if flow:
        from flows.structure_search import structure_search

        res.engine.dispose()
        out = structure_search(
            environment=environment, seed=seed, cost_model=cost_model, scope=scope
        )
    else:
        params = SearchParams(
            environment=environment, seed=seed, cost_model=cost_model, scope=scope
        )
        out = run_structure_search(DirectRunner(res), params).summary
    emit(out, as_json)


@structures_app.command("show")
def show_cmd(
    scope: Annotated[str, typer.Option(help="Bundle scope.")] = "office",
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """The current structure, its parent chain and the newest search's archive."""
    from apps.cli.common import open_resources
    from reflexmem.operations.structures import show_structures

    emit(show_structures(open_resources(), scope), as_json)  # exit 2 on an unmigrated ledger
