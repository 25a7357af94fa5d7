"""Structure versions: check a file, mutate, search, show, test for drift, roll back.

`drift` and `rollback` are the user's handle on the rollout safety net that the daily
`audit` flow runs on its own (docs/structures.md, "Drift, quarantine and rollback").
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from apps.cli.common import app, console, emit, err

if TYPE_CHECKING:
    from reflexmem.operations.resources import Resources

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
    environment: Annotated[
        str,
        typer.Option(
            help="trading (your roles on your settled decisions), or experiment B's "
            "composite or independent."
        ),
    ] = "composite",
    trading: Annotated[
        bool, typer.Option("--trading", help="Shorthand for --environment trading.")
    ] = False,
    seed: Annotated[int, typer.Option(help="Seed of the task sets.")] = 0,
    cost_model: Annotated[
        str | None,
        typer.Option(help="experiment-b, default or trading (default: by environment)."),
    ] = None,
    scope: Annotated[
        str | None, typer.Option(help="Bundle scope (default: trading or office).")
    ] = None,
    flow: Annotated[bool, typer.Option("--flow/--direct", help="Run as a Prefect flow.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Run the selection loop from the active structure; register and activate the winner."""
    from apps.cli.common import open_resources
    from reflexmem.operations.runner import DirectRunner
    from reflexmem.operations.structures import SearchParams, run_structure_search

    if trading:
        environment = "trading"
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


def _known_scope(res: Resources, scope: str) -> None:
    """Exit 2 unless a bundle was ever activated in `scope`."""
    from reflexmem.structures import restore

    with res.engine.connect() as conn:
        known = restore.scopes(conn)
    if scope not in known:
        err.print(f"[red]unknown scope[/red] {scope!r} (scopes: {', '.join(known) or 'none'})")
        raise typer.Exit(2)


@structures_app.command("drift")
def drift_cmd(
    scope: Annotated[
        str | None, typer.Option(help="Bundle scope (default: every scope with one).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """The drift test of each active bundle and what a rollback would restore; changes nothing."""
    from apps.cli.common import open_resources
    from reflexmem.operations.cycle import plain
    from reflexmem.operations.structure_audit import audit_structures

    res = open_resources()  # exit 2 on an unmigrated ledger
    if scope is not None:
        _known_scope(res, scope)
    emit(plain(audit_structures(res, scope, apply=False)), as_json)


@structures_app.command("rollback")
def rollback_cmd(
    scope: Annotated[str, typer.Option(help="Bundle scope.")] = "office",
    to: Annotated[
        str | None,
        typer.Option(
            "--to",
            help="Bundle ID, structure ID or MLflow model version (default: the previous one).",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Quarantine the active bundle and restore an earlier verified one (pins checked)."""
    from apps.cli.common import open_resources
    from reflexmem.operations.cycle import plain
    from reflexmem.operations.structure_audit import rollback_structure
    from reflexmem.structures.restore import RollbackRefused

    res = open_resources()  # exit 2 on an unmigrated ledger
    _known_scope(res, scope)
    try:
        done = rollback_structure(res, scope, to)
    except RollbackRefused as exc:
        err.print(f"[red]rollback refused[/red] {exc}", soft_wrap=True)
        raise typer.Exit(2) from exc
    emit(plain(done), as_json)
