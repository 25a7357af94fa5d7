"""The scheduled maturation check: settle, mature, evaluate, promote the first runs.

Composition only. Each step is one batch task over the whole ledger (never one task per
case), each is idempotent, so a re-run after a crash picks up where the last commit
left off. The initial promotion makes the first evaluation of a decision its primary
run, recorded as its own promotion batch in MLflow; replays are never promoted here.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from prefect import flow
from prefect.artifacts import create_table_artifact

from reflexmem.evaluation import DEFAULT_PROFILE
from reflexmem.settings import Settings
from tasks.evaluation import evaluate, promote
from tasks.maturation import mature, settle_positions

MATURATION_CRON = "0 * * * *"


@flow(name="maturation_check")
def maturation_check(
    database_url: str | None = None,
    tracking_uri: str | None = None,
    profile: str = DEFAULT_PROFILE,
    version: int | None = None,
    as_of: datetime | None = None,
) -> dict[str, Any]:
    """Settle positions, decide maturity, evaluate matured cases, promote first runs."""
    settings = Settings()
    url = database_url or settings.resolved_database_url
    uri = tracking_uri or settings.resolved_tracking_uri
    when = as_of or datetime.now(UTC)
    settled = settle_positions(url)
    matured = mature(url, when, settings.min_evaluation_points, profile)
    evaluated = evaluate(url, uri, profile, version)
    promoted = promote(url, uri, profile, source_batch=evaluated["batch_id"], version=version)
    counts: dict[str, Any] = {
        **settled,
        **matured,
        "evaluated": evaluated["runs"],
        "evaluation_batch": evaluated["batch_id"],
        "evaluation_mlflow_run": evaluated["mlflow_run_id"] or "-",
        "promoted": promoted["promoted"],
        "promotion_mlflow_run": promoted["mlflow_run_id"] or "-",
    }
    create_table_artifact(
        key="maturation-check",
        table=[{"count": k, "value": str(v)} for k, v in counts.items()],
        description=f"maturation check as of {when.isoformat()}",
    )
    return counts
