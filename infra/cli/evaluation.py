"""Maturation, evaluation runs, promotion, reflection and serving the deployments."""

from __future__ import annotations

from typing import Annotated

import typer

from infra.cli.common import (
    app,
    console,
    err,
    eval_app,
)
from reflexmem.settings import Settings


@eval_app.command("run")
def eval_run_cmd(
    profile: Annotated[str, typer.Option(help="Benchmark profile.")] = "spy_daily",
    version: Annotated[int | None, typer.Option(help="Profile version.")] = None,
) -> None:
    """Evaluate every matured, unevaluated case as one batch (one MLflow run)."""
    from infra.services import ready_engine
    from infra.tracking_eval import EvaluationTracker, tracked_evaluate
    from reflexmem.evaluation import get_profile
    from reflexmem.maturation import dfull_prices

    settings = Settings()
    tracker = EvaluationTracker(
        settings.resolved_tracking_uri, ledger_url=settings.resolved_database_url
    )
    result = tracked_evaluate(
        ready_engine(settings), tracker, dfull_prices(), get_profile(profile, version)
    )
    console.print(
        f"{result.n_runs} run(s), batch {result.info.batch_id}, MLflow run {result.mlflow_run_id}"
    )


@eval_app.command("replay")
def eval_replay_cmd(
    profile: Annotated[str, typer.Option(help="Benchmark profile.")] = "spy_daily",
    version: Annotated[int | None, typer.Option(help="Profile version to replay with.")] = None,
    role: Annotated[list[str] | None, typer.Option(help="Only these roles.")] = None,
) -> None:
    """Re-evaluate decisions that have a primary run: new runs, none promoted."""
    from infra.services import ready_engine
    from infra.tracking_eval import EvaluationTracker, tracked_evaluate
    from reflexmem.evaluation import get_profile
    from reflexmem.maturation import dfull_prices

    settings = Settings()
    tracker = EvaluationTracker(
        settings.resolved_tracking_uri, ledger_url=settings.resolved_database_url
    )
    result = tracked_evaluate(
        ready_engine(settings),
        tracker,
        dfull_prices(),
        get_profile(profile, version),
        replay_runs=True,
        roles=role,
    )
    console.print(
        f"replay: {result.n_runs} new run(s), batch {result.info.batch_id}, "
        f"MLflow run {result.mlflow_run_id}; promote with `reflexmem eval promote`"
    )


@eval_app.command("promote")
def eval_promote_cmd(
    profile: Annotated[str, typer.Option(help="Benchmark profile.")] = "spy_daily",
    version: Annotated[int | None, typer.Option(help="Only runs of this version.")] = None,
    batch: Annotated[str | None, typer.Option(help="Only runs of this batch.")] = None,
    run: Annotated[list[str] | None, typer.Option(help="Explicit run IDs.")] = None,
) -> None:
    """Make the newest matching run of each decision its one primary run."""
    from infra.services import ready_engine
    from infra.tracking_eval import EvaluationTracker, tracked_promote
    from reflexmem.evaluation import PromotionError

    settings = Settings()
    tracker = EvaluationTracker(
        settings.resolved_tracking_uri, ledger_url=settings.resolved_database_url
    )
    try:
        result = tracked_promote(
            ready_engine(settings),
            tracker,
            profile,
            version=version,
            source_batch=batch,
            run_ids=run,
        )
    except PromotionError as exc:
        err.print(f"[red]promotion refused:[/red] {exc}")
        raise typer.Exit(2) from exc
    console.print(f"{result.promoted} run(s) promoted, MLflow run {result.mlflow_run_id}")


@app.command("mature")
def mature_cmd(
    flow: Annotated[bool, typer.Option("--flow/--direct", help="Run as a Prefect flow.")] = False,
) -> None:
    """Settle positions, decide maturity, evaluate and promote the first runs."""
    settings = Settings()
    if flow:
        from flows.maturation import maturation_check

        console.print_json(data=maturation_check(), default=str)
        return
    from datetime import UTC, datetime

    from infra.services import ready_engine
    from infra.tracking_eval import EvaluationTracker, tracked_evaluate, tracked_promote
    from reflexmem.evaluation import get_profile
    from reflexmem.maturation import dfull_prices, mature_cases, settle_open_positions
    from reflexmem.registry import load_registry

    engine = ready_engine(settings)
    source, registry, profile = dfull_prices(), load_registry(), get_profile()
    with engine.begin() as conn:
        settled = settle_open_positions(conn, source, registry)
        report = mature_cases(
            conn,
            registry,
            as_of=datetime.now(UTC),
            min_points=settings.min_evaluation_points,
            profile=profile.name,
        )
    tracker = EvaluationTracker(
        settings.resolved_tracking_uri, ledger_url=settings.resolved_database_url
    )
    evaluated = tracked_evaluate(engine, tracker, source, profile)
    promoted = tracked_promote(
        engine, tracker, profile.name, source_batch=evaluated.info.batch_id, only_unpromoted=True
    )
    console.print_json(
        data={
            "settled": settled.settled,
            "matured": report.matured,
            "pending": report.pending,
            "evaluated": evaluated.n_runs,
            "promoted": promoted.promoted,
        }
    )


@app.command("reflect")
def reflect_cmd(
    role: Annotated[list[str] | None, typer.Option(help="Only these roles.")] = None,
    flow: Annotated[bool, typer.Option("--flow/--direct", help="Run as a Prefect flow.")] = False,
) -> None:
    """Reflect on matured cases with the configured reflector (REFLEX_LLM_*)."""
    settings = Settings()
    if flow:
        from flows.reflection import reflection_batch

        console.print_json(data=reflection_batch(roles=role), default=str)
        return
    from infra.reflection_settings import ReflectionSettings
    from infra.services import ready_engine
    from reflexmem.reflection.batch import guarded_executor, reflect_all
    from reflexmem.registry import load_registry

    llm = ReflectionSettings()
    executor, _ = guarded_executor()
    reports = reflect_all(
        ready_engine(settings),
        load_registry(),
        llm.build_reflector(executor),
        roles=role,
        reflector_name=llm.reflector,
        limit=llm.batch_limit,
        budget=llm.budget(),
        executor=executor,
    )
    console.print_json(data=[r.as_row() for r in reports])


@app.command("serve")
def serve_cmd() -> None:
    """Serve the scheduled deployments against the Prefect server at PREFECT_API_URL."""
    from infra.deployments import serve

    serve()
