"""Evaluation runs: evaluate matured cases, replay with another profile version, promote."""

from __future__ import annotations

from typing import Annotated

import typer

from apps.cli.common import console, err, eval_app, open_resources


@eval_app.command("run")
def eval_run_cmd(
    profile: Annotated[str | None, typer.Option(help="Benchmark profile.")] = None,
    version: Annotated[int | None, typer.Option(help="Profile version.")] = None,
) -> None:
    """Evaluate every matured, unevaluated case as one batch (one MLflow run)."""
    from reflexmem.operations import evaluation

    report = evaluation.evaluate(open_resources(), profile, version)
    console.print(
        f"{report.runs} run(s), batch {report.batch_id}, MLflow run {report.mlflow_run_id}"
    )


@eval_app.command("replay")
def eval_replay_cmd(
    profile: Annotated[str | None, typer.Option(help="Benchmark profile.")] = None,
    version: Annotated[int | None, typer.Option(help="Profile version to replay with.")] = None,
    role: Annotated[list[str] | None, typer.Option(help="Only these roles.")] = None,
) -> None:
    """Re-evaluate decisions that have a primary run: new runs, none promoted."""
    from reflexmem.operations import evaluation

    report = evaluation.replay(open_resources(), profile, version, roles=role)
    console.print(
        f"replay: {report.runs} new run(s), batch {report.batch_id}, "
        f"MLflow run {report.mlflow_run_id}; promote with `reflexmem eval promote`"
    )


@eval_app.command("promote")
def eval_promote_cmd(
    profile: Annotated[str | None, typer.Option(help="Benchmark profile.")] = None,
    version: Annotated[int | None, typer.Option(help="Only runs of this version.")] = None,
    batch: Annotated[str | None, typer.Option(help="Only runs of this batch.")] = None,
    run: Annotated[list[str] | None, typer.Option(help="Explicit run IDs.")] = None,
) -> None:
    """Make the newest matching run of each decision its one primary run."""
    from reflexmem.evaluation import PromotionError
    from reflexmem.operations import evaluation

    try:
        report = evaluation.promote(
            open_resources(), profile, version=version, source_batch=batch, run_ids=run
        )
    except PromotionError as exc:
        err.print(f"[red]promotion refused:[/red] {exc}")
        raise typer.Exit(2) from exc
    console.print(f"{report.promoted} run(s) promoted, MLflow run {report.mlflow_run_id}")
