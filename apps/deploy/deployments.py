"""Every deployment and its cron schedule, in one place: served, or sent to a work pool.

Two ways to run them. `reflexmem serve` (`serve()`) is the single-process embedded
choice: one process holds every schedule and runs every flow. `deploy_to_pool()` (what
`reflexmem stack up` and `reflexmem stack deploy` call) creates the same deployments on
a Prefect server for a process work pool: any number of workers, on any machine with the
package installed, pick the runs up (entrypoints are module paths, `flows.cycle:...`, so
no code is shipped), and a run survives the death of the process that created it.
Deployments where overlap is unsafe (the daily cycle, admission, maturation) carry a
concurrency limit of one: a second run waits in `AwaitingConcurrencySlot` until the
first ends. Retries and failure hooks are on the flows themselves (`flows/cycle.py`).

A deployment pins the ledger and tracking URIs of the settings it was created with
(`Settings.pinned()`: absolute paths), so a deployment served from another folder, or a
run picked up by a worker started elsewhere, still works on the same ledger.

`serve()` runs the flows against the Prefect server named by `PREFECT_API_URL` (start
one with `prefect server start`). Before serving it makes sure each role tag
(`role:<id>`) has a concurrency limit of one, so the server also refuses to run two
reflection tasks of one role at once (the database lock holds either way).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from reflexmem.settings import Settings

DAILY = "daily-cycle"
ADMISSION = "admission-every-10-minutes"
MATURATION = "maturation-check-hourly"
REFLECTION = "reflection-batch-hourly"
DISTILLATION = "distillation-hourly"
STRUCTURE_SEARCH = "structure-search-daily"
CANDIDATE_GENERATION = "candidate-generation-daily"
SHADOW_EVALUATION = "shadow-evaluation-hourly"
AUDIT = "skill-audit-daily"


SERIAL = frozenset({DAILY, ADMISSION, MATURATION})
"""Deployments that must never overlap with themselves (limit one, later runs enqueue)."""
WORKER_ENV = ("REFLEX_TASK_RUNNER", "REFLEX_DASK_ADDRESS", "REFLEX_DASK_WORKERS")
"""Settings a deployment passes to its runs' processes besides the pinned parameters."""


@dataclass(frozen=True)
class DeploymentSpec:
    """A flow, the name of its deployment and its cron schedule."""

    name: str
    cron: str
    flow: Any


def specs() -> list[DeploymentSpec]:
    """The deployments (imported lazily: Prefect loads only when serving)."""
    from flows import cycle, skills
    from flows.structure_search import STRUCTURE_SEARCH_CRON, structure_search

    return [
        DeploymentSpec(DAILY, cycle.DAILY_CRON, cycle.daily_cycle),
        DeploymentSpec(ADMISSION, cycle.ADMISSION_CRON, cycle.admission),
        DeploymentSpec(MATURATION, cycle.MATURATION_CRON, cycle.maturation_check),
        DeploymentSpec(REFLECTION, cycle.REFLECTION_CRON, cycle.reflection_batch),
        DeploymentSpec(DISTILLATION, cycle.DISTILLATION_CRON, cycle.distillation),
        DeploymentSpec(STRUCTURE_SEARCH, STRUCTURE_SEARCH_CRON, structure_search),
        DeploymentSpec(CANDIDATE_GENERATION, skills.GENERATION_CRON, skills.candidate_generation),
        DeploymentSpec(SHADOW_EVALUATION, skills.SHADOW_CRON, skills.shadow_evaluation),
        DeploymentSpec(AUDIT, skills.AUDIT_CRON, skills.audit),
    ]


def pinned_parameters(settings: Settings) -> dict[str, str]:
    """The ledger and tracking URIs (and the home) every deployment is created with."""
    pinned = settings.pinned()
    return {
        "database_url": pinned.resolved_database_url,
        "tracking_uri": pinned.resolved_tracking_uri,
        "home": str(pinned.home),
    }


def deployments(settings: Settings) -> list[Any]:
    """`flow.to_deployment(name, cron=..., parameters=<pinned URIs>)` for every spec."""
    params = pinned_parameters(settings)
    return [s.flow.to_deployment(s.name, cron=s.cron, parameters=params) for s in specs()]


def run_env(settings: Settings) -> dict[str, str]:
    """Environment of a pooled run's process: its home, ledger, tracking store, fan-out.

    Parameters already pin the ledger and tracking URIs; the environment repeats them
    (and the MLflow artifact root and UI URL) for what reads settings rather than
    parameters, and names the fan-out the deploying process was configured with.
    """
    pinned = settings.pinned()
    env = {
        "REFLEX_HOME": str(pinned.home),
        "REFLEX_DATABASE_URL": pinned.resolved_database_url,
        "REFLEX_MLFLOW_TRACKING_URI": pinned.resolved_tracking_uri,
        "REFLEX_ARTIFACT_ROOT": str(pinned.resolved_artifact_root),
        "REFLEX_MLFLOW_UI_URL": settings.mlflow_ui_url,
        "REFLEX_TASK_RUNNER": settings.task_runner,
        "REFLEX_DASK_WORKERS": str(settings.dask_workers),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    }
    if settings.dask_address:
        env["REFLEX_DASK_ADDRESS"] = settings.dask_address
    return env


def pool_deployment(
    spec: DeploymentSpec,
    settings: Settings,
    *,
    interval_s: float | None = None,
    concurrency_limit: int | None = None,
) -> Any:
    """One work-pool deployment: module-path entrypoint, pinned parameters, schedule, limit.

    `interval_s` replaces the cron schedule (the topology test runs every few seconds).
    """
    from datetime import timedelta

    from prefect.client.schemas.objects import ConcurrencyLimitConfig, ConcurrencyLimitStrategy
    from prefect.deployments.runner import EntrypointType  # type: ignore[attr-defined]

    limit = (
        concurrency_limit if concurrency_limit is not None else (1 if spec.name in SERIAL else None)
    )
    schedule: dict[str, Any] = (
        {"interval": timedelta(seconds=interval_s)} if interval_s else {"cron": spec.cron}
    )
    return spec.flow.to_deployment(
        spec.name,
        parameters=pinned_parameters(settings),
        entrypoint_type=EntrypointType.MODULE_PATH,
        concurrency_limit=None
        if limit is None
        else ConcurrencyLimitConfig(
            limit=limit, collision_strategy=ConcurrencyLimitStrategy.ENQUEUE
        ),
        job_variables={"env": run_env(settings)},
        tags=["reflexmem"],
        **schedule,
    )


def deploy_to_pool(
    settings: Settings,
    pool: str,
    names: list[str] | None = None,
    interval_s: float | None = None,
) -> dict[str, str]:
    """Create (or update) the deployments on the server at `PREFECT_API_URL` for `pool`.

    Returns deployment name -> ID. Also makes sure each role tag has its limit of one.
    Prefect's progress table goes to stderr, so a command's stdout stays one JSON object.
    """
    import contextlib
    import sys

    import anyio
    from prefect.deployments.runner import deploy

    from reflexmem.registry import load_registry

    chosen = [s for s in specs() if names is None or s.name in names]
    deps = [pool_deployment(s, settings, interval_s=interval_s) for s in chosen]
    with contextlib.redirect_stdout(sys.stderr):
        ids: list[Any] = deploy(  # type: ignore[assignment]
            *deps,
            work_pool_name=pool,
            build=False,
            push=False,
            print_next_steps_message=False,
            ignore_warnings=True,
        )
    anyio.run(ensure_role_limits, list(load_registry().ids))
    return {s.name: str(i) for s, i in zip(chosen, ids, strict=True)}


async def ensure_role_limits(role_ids: list[str], limit: int = 1) -> list[str]:
    """Create (or reset) a tag concurrency limit of `limit` for each `role:<id>` tag."""
    from prefect.client.orchestration import get_client

    tags = [f"role:{r}" for r in role_ids]
    async with get_client() as client:
        for tag in tags:
            await client.create_concurrency_limit(tag=tag, concurrency_limit=limit)
    return tags


def serve(settings: Settings) -> None:
    """Serve every deployment until interrupted (needs `PREFECT_API_URL`)."""
    import anyio
    from prefect import serve as prefect_serve

    from reflexmem.registry import load_registry

    anyio.run(ensure_role_limits, list(load_registry().ids))
    prefect_serve(*deployments(settings))
