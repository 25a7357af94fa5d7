"""Prefect task of reflection: one role's batch, tagged `role:<id>`.

The tag lets a Prefect server's tag concurrency limit (see `infra/deployments.py`) hold a
second run of the same role; the database lock taken inside the batch is what guarantees
serialization when no server, or no limit, is there.
"""

from __future__ import annotations

from datetime import date
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from infra.reflection_settings import ReflectionSettings
from reflexmem.reflection.batch import guarded_executor, reflect_role
from tasks.maturation import engine_for, registry


@task(name="reflect-role", retries=1, retry_delay_seconds=5, cache_policy=NO_CACHE)
def reflect(
    database_url: str,
    role_id: str,
    profile: str,
    llm: dict[str, Any] | None = None,
    day: date | None = None,
) -> dict[str, Any]:
    """Reflect on one role's offerable cases (serialized per role by a database lock)."""
    settings = ReflectionSettings(**(llm or {}))
    executor, _broker = guarded_executor()
    reflector = settings.build_reflector(executor)
    try:
        report = reflect_role(
            engine_for(database_url),
            registry(),
            role_id,
            reflector,
            reflector_name=settings.reflector,
            profile=profile,
            limit=settings.batch_limit,
            budget=settings.budget(),
            day=day,
            executor=executor,
        )
    finally:
        close = getattr(reflector, "close", None)
        if callable(close):
            close()
    return report.as_row()
