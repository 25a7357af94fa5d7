"""Prefect tasks of the maturation check: one core call each, safe to retry.

Both steps are idempotent by their own selection (only open positions are settled, only
pending or unevaluated cases are re-decided), so a retry or a re-run after a crash
repeats nothing that was committed.
"""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from prefect import task
from prefect.cache_policies import NO_CACHE

from infra.db import make_engine
from reflexmem.maturation import dfull_prices, mature_cases, settle_open_positions
from reflexmem.maturation.prices import MappingPrices
from reflexmem.registry import RoleRegistry, load_registry


@functools.cache
def engine_for(url: str) -> sa.Engine:
    """One pooled engine per ledger URL per worker process."""
    return make_engine(url)


@functools.cache
def registry() -> RoleRegistry:
    """The shipped role registry (validated once per process)."""
    return load_registry()


@functools.cache
def prices() -> MappingPrices:
    """The vendored D-full price source (hourly bars + daily SPY), loaded once."""
    return dfull_prices()


@task(name="settle-positions", retries=2, retry_delay_seconds=2, cache_policy=NO_CACHE)
def settle_positions(database_url: str) -> dict[str, Any]:
    """Settle open positions whose horizon the price source covers."""
    with engine_for(database_url).begin() as conn:
        report = settle_open_positions(conn, prices(), registry())
    return {"open_positions": report.open_positions, "settled": report.settled}


@task(name="mature-cases", retries=2, retry_delay_seconds=2, cache_policy=NO_CACHE)
def mature(database_url: str, as_of: datetime, min_points: int, profile: str) -> dict[str, Any]:
    """Move due, settled, well-measured cases to eligible; keep the rest pending with a reason."""
    with engine_for(database_url).begin() as conn:
        report = mature_cases(conn, registry(), as_of=as_of, min_points=min_points, profile=profile)
    return {
        "candidates": report.candidates,
        "matured": report.matured,
        "changed": report.changed,
        **{f"pending_{k}": v for k, v in report.pending.items()},
    }
