"""Prefect tasks of evaluation: evaluate, replay and promote, each one tracked core call.

Each task is one transaction plus its MLflow run, so a retry either finds the work
committed (and selects nothing) or starts it again from scratch.
"""

from __future__ import annotations

from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from infra.tracking_eval import EvaluationTracker, tracked_evaluate, tracked_promote
from reflexmem.evaluation import EvaluationResult, PromotionResult, get_profile
from tasks.maturation import engine_for, prices


def _summary(result: EvaluationResult) -> dict[str, Any]:
    return {
        "batch_id": result.info.batch_id,
        "kind": result.info.kind,
        "mlflow_run_id": result.mlflow_run_id,
        "runs": result.n_runs,
    }


def _promotion(result: PromotionResult) -> dict[str, Any]:
    return {
        "batch_id": result.info.batch_id,
        "mlflow_run_id": result.mlflow_run_id,
        "promoted": result.promoted,
    }


@task(name="evaluate-matured", retries=2, retry_delay_seconds=2, cache_policy=NO_CACHE)
def evaluate(
    database_url: str, tracking_uri: str, profile: str, version: int | None = None
) -> dict[str, Any]:
    """Evaluate every matured, unevaluated case: one batch, one MLflow run."""
    tracker = EvaluationTracker(tracking_uri, ledger_url=database_url)
    result = tracked_evaluate(
        engine_for(database_url), tracker, prices(), get_profile(profile, version)
    )
    return _summary(result)


@task(name="evaluate-replay", retries=1, retry_delay_seconds=2, cache_policy=NO_CACHE)
def replay(
    database_url: str,
    tracking_uri: str,
    profile: str,
    version: int | None = None,
    roles: list[str] | None = None,
) -> dict[str, Any]:
    """Re-evaluate decisions with a primary run: new, unpromoted runs."""
    tracker = EvaluationTracker(tracking_uri, ledger_url=database_url)
    result = tracked_evaluate(
        engine_for(database_url),
        tracker,
        prices(),
        get_profile(profile, version),
        replay_runs=True,
        roles=roles,
    )
    return _summary(result)


@task(name="promote-runs", retries=2, retry_delay_seconds=2, cache_policy=NO_CACHE)
def promote(
    database_url: str,
    tracking_uri: str,
    profile: str,
    source_batch: str | None = None,
    only_unpromoted: bool = True,
    version: int | None = None,
) -> dict[str, Any]:
    """Promote the newest run per decision of a batch (the initial primaries by default)."""
    tracker = EvaluationTracker(tracking_uri, ledger_url=database_url)
    result = tracked_promote(
        engine_for(database_url),
        tracker,
        profile,
        source_batch=source_batch,
        only_unpromoted=only_unpromoted,
        version=version,
    )
    return _promotion(result)
