"""Every deployment and its cron schedule, in one place; `reflexmem serve` serves them.

`serve()` runs the flows against the Prefect server named by `PREFECT_API_URL` (start
one with `prefect server start`). Before serving it makes sure each role tag
(`role:<id>`) has a concurrency limit of one, so the server also refuses to run two
reflection tasks of one role at once (the database lock holds either way).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MATURATION = "maturation-check-hourly"
REFLECTION = "reflection-batch-hourly"
DISTILLATION = "distillation-quarter-hourly"
STRUCTURE_SEARCH = "structure-search-daily"


@dataclass(frozen=True)
class DeploymentSpec:
    """A flow, the name of its deployment and its cron schedule."""

    name: str
    cron: str
    flow: Any


def specs() -> list[DeploymentSpec]:
    """The deployments (imported lazily: Prefect loads only when serving)."""
    from flows.distillation import DISTILLATION_CRON, distillation
    from flows.maturation import MATURATION_CRON, maturation_check
    from flows.reflection import REFLECTION_CRON, reflection_batch
    from flows.structure_search import STRUCTURE_SEARCH_CRON, structure_search

    return [
        DeploymentSpec(MATURATION, MATURATION_CRON, maturation_check),
        DeploymentSpec(REFLECTION, REFLECTION_CRON, reflection_batch),
        DeploymentSpec(DISTILLATION, DISTILLATION_CRON, distillation),
        DeploymentSpec(STRUCTURE_SEARCH, STRUCTURE_SEARCH_CRON, structure_search),
    ]


def deployments() -> list[Any]:
    """`flow.to_deployment(name, cron=...)` for every spec."""
    return [s.flow.to_deployment(s.name, cron=s.cron) for s in specs()]


async def ensure_role_limits(role_ids: list[str], limit: int = 1) -> list[str]:
    """Create (or reset) a tag concurrency limit of `limit` for each `role:<id>` tag."""
    from prefect.client.orchestration import get_client

    tags = [f"role:{r}" for r in role_ids]
    async with get_client() as client:
        for tag in tags:
            await client.create_concurrency_limit(tag=tag, concurrency_limit=limit)
    return tags


def serve() -> None:
    """Serve every deployment until interrupted (needs `PREFECT_API_URL`)."""
    import anyio
    from prefect import serve as prefect_serve

    from reflexmem.registry import load_registry

    anyio.run(ensure_role_limits, list(load_registry().ids))
    prefect_serve(*deployments())
