"""The scheduled reflection batch: one task per role, tagged `role:<id>`, run side by side.

Roles are independent (a lesson never crosses roles), so their batches are submitted
concurrently; the same role is serialized by the database lock inside the task and, on
a server, by the tag concurrency limit. Each task covers every offerable case of its
role in one batch, never one task per case.
"""

from __future__ import annotations

from datetime import date
from typing import Any

from prefect import flow
from prefect.artifacts import create_table_artifact

from reflexmem.evaluation import DEFAULT_PROFILE
from reflexmem.settings import Settings
from tasks.maturation import registry
from tasks.reflection import reflect

REFLECTION_CRON = "30 * * * *"


@flow(name="reflection_batch")
def reflection_batch(
    database_url: str | None = None,
    roles: list[str] | None = None,
    profile: str = DEFAULT_PROFILE,
    llm: dict[str, Any] | None = None,
    day: date | None = None,
) -> list[dict[str, Any]]:
    """Reflect on every role's offerable cases; publish counts per role."""
    url = database_url or Settings().resolved_database_url
    futures = [
        reflect.with_options(tags=[f"role:{role_id}"]).submit(url, role_id, profile, llm, day)
        for role_id in roles or registry().ids
    ]
    rows = [f.result() for f in futures]
    create_table_artifact(
        key="reflection-batch",
        table=rows or [{"role": "-", "offered": 0}],
        description=f"reflection of {len(rows)} role(s)",
    )
    return rows
