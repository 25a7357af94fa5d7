"""Prefect tasks of the structure search: one `adapters.structures_service` stage each."""

from __future__ import annotations

from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from adapters import structures_service as svc
from reflexmem.structures.controls import Controls
from reflexmem.structures.search import SearchResult


@task(name="structure-prepare", retries=1, retry_delay_seconds=2, cache_policy=NO_CACHE)
def prepare(t: svc.Targets, environment: str, seed: int) -> str:
    """The scope's active structure (all-shared on first use), registered in MLflow."""
    return svc.prepare(t, environment, seed)


@task(name="structure-search", cache_policy=NO_CACHE)
def search(t: svc.Targets, environment: str, seed: int, cost_model: str) -> SearchResult:
    """Freeze the active structure and run the selection loop."""
    return svc.search(t, environment, seed, cost_model)


@task(name="structure-controls-and-test", cache_policy=NO_CACHE)
def controls_and_test(
    result: SearchResult, environment: str, seed: int
) -> tuple[Controls, list[dict[str, Any]]]:
    """Both controls, then the final test of the chosen version."""
    return svc.controls_and_test(result, environment, seed)


@task(name="structure-store", retries=1, retry_delay_seconds=2, cache_policy=NO_CACHE)
def store(
    t: svc.Targets,
    result: SearchResult,
    environment: str,
    controls: Controls,
    rows: list[dict[str, Any]],
) -> dict[str, Any]:
    """Ledger rows: the search, its archive, the winner version."""
    return svc.store(t, result, environment, controls, rows)


@task(name="structure-register", retries=1, retry_delay_seconds=2, cache_policy=NO_CACHE)
def register(
    t: svc.Targets,
    row: dict[str, Any],
    result: SearchResult,
    rows: list[dict[str, Any]],
    environment: str,
    seed: int,
) -> dict[str, Any] | None:
    """The MLflow registered model version with its aliases."""
    return svc.register(t, row, result, rows, environment, seed)


@task(name="structure-activate", retries=1, retry_delay_seconds=2, cache_policy=NO_CACHE)
def activate(t: svc.Targets, row: dict[str, Any], result: SearchResult) -> str | None:
    """The winner's bundle becomes the scope's active bundle."""
    return svc.activate(t, row, result)
