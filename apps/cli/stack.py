"""`reflexmem stack up|down|status|deploy|env`: the production topology on this machine.

`up` starts a Prefect server, an MLflow tracking server (PostgreSQL store) and a
process work pool with one worker, and deploys the flows to it when the ledger is
migrated; `down` stops only what `up` started; `status` checks each part. The logic is
in `apps/deploy/stack.py`; `reflexmem serve` stays the single-process embedded choice.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Annotated

import typer

from apps.cli.common import app, emit, err

stack_app = typer.Typer(no_args_is_help=True, help="The production topology on this machine.")
app.add_typer(stack_app, name="stack")


@stack_app.command("up")
def up_cmd(
    artifact_root: Annotated[
        Path | None, typer.Option(help="MLflow artifact folder (default: REFLEX_HOME/stack).")
    ] = None,
    mlflow_db: Annotated[
        str, typer.Option(help="PostgreSQL database of MLflow.")
    ] = "reflex_mlflow",
    pool: Annotated[str, typer.Option(help="Name of the process work pool.")] = "reflex-pool",
    deploy: Annotated[
        bool, typer.Option(help="Deploy the flows when the ledger is migrated.")
    ] = True,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Start Prefect server, MLflow server and a worker; deploy the flows to the pool."""
    from apps.deploy.processes import StackError
    from apps.deploy.stack import up
    from reflexmem.settings import Settings

    settings = Settings()
    try:
        state = up(
            settings, artifact_root=artifact_root, mlflow_db=mlflow_db, pool=pool, deploy=deploy
        )
    except StackError as exc:
        err.print(f"[red]stack up:[/red] {exc}")
        raise typer.Exit(1) from exc
    if not state["ledger"]["migrated"]:
        err.print(
            "the ledger is not migrated, so nothing was deployed: run\n"
            '  eval "$(reflexmem stack env)" && reflexmem db upgrade && reflexmem stack deploy'
        )
    emit(state, as_json)


@stack_app.command("deploy")
def deploy_cmd(
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """(Re)deploy every flow to the recorded stack's work pool."""
    from apps.deploy.stack import deploy_stack, ledger_current, read_state
    from reflexmem.settings import Settings

    settings = Settings()
    state = read_state(settings)
    if state is None:
        err.print("no stack is recorded: `reflexmem stack up` first")
        raise typer.Exit(2)
    if not ledger_current(state["ledger"]["url"]):
        err.print("the stack's ledger is not migrated: `reflexmem db upgrade` first")
        raise typer.Exit(2)
    emit(deploy_stack(settings, state), as_json)


@stack_app.command("down")
def down_cmd(
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Stop the processes `stack up` started (by recorded PID and process group)."""
    from apps.deploy.stack import down
    from reflexmem.settings import Settings

    emit(down(Settings()), as_json)


@stack_app.command("status")
def status_cmd(
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Each part of the recorded stack: running, healthy or online. Exit 1 if not all up."""
    from apps.deploy.stack_live import status
    from reflexmem.settings import Settings

    report = status(Settings())
    emit(report, as_json)
    if not report["up"]:
        raise typer.Exit(1)


@stack_app.command("env")
def env_cmd() -> None:
    """`export` lines for a shell to use the stack: `eval "$(reflexmem stack env)"`."""
    from apps.deploy.processes import StackError
    from apps.deploy.stack import shell_env
    from reflexmem.settings import Settings

    try:
        values = shell_env(Settings())
    except StackError as exc:
        err.print(str(exc))
        raise typer.Exit(2) from exc
    for key, value in values.items():
        sys.stdout.write(f"export {key}={shlex.quote(value)}\n")
