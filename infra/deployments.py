"""Every deployment and its cron schedule, in one place; `reflexmem serve` serves them.

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
    return [
        s.flow.to_deployment(s.name, cron=s.cron, parameters=_accepted(s.flow, params))
        for s in specs()
    ]


def _accepted(flow: Any, params: dict[str, str]) -> dict[str, str]:
    """The pinned parameters this flow takes (every cycle flow takes all three)."""
    import inspect

    names = inspect.signature(flow.fn).parameters
    return {k: v for k, v in params.items() if k in names}


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
