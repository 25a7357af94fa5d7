"""Stages that decide when an outcome is known: plan the run, settle positions, mature cases.

`plan` fixes the cycle's clock once, so every later stage judges against the same
instant: the `as_of` asked for, else the newest bar the price source holds. The wall
clock is never used, so re-running the cycle over historical data matures nothing
before its time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from reflexmem.maturation import MaturityReport, SettleReport, mature_cases, settle_open_positions
from reflexmem.operations.resources import Resources


@dataclass(frozen=True)
class CyclePlan:
    """The clock and the roles of one cycle run; None when no market data exists yet."""

    as_of: datetime | None
    roles: tuple[str, ...]


def plan(
    res: Resources, as_of: datetime | None = None, roles: Sequence[str] | None = None
) -> CyclePlan:
    """Resolve the cycle's clock and roles (unknown roles are an error, never skipped)."""
    for role_id in roles or ():
        res.registry.get(role_id)
    when = as_of if as_of is not None else res.prices.newest()
    return CyclePlan(as_of=when, roles=tuple(roles) if roles else res.registry.ids)


def settle(res: Resources, as_of: datetime | None = None) -> SettleReport:
    """Settle every open position whose horizon the prices known at `as_of` cover."""
    with res.engine.begin() as conn:
        return settle_open_positions(conn, res.prices, res.registry, as_of=as_of)


def mature(res: Resources, as_of: datetime | None, profile: str | None = None) -> MaturityReport:
    """Move due, settled, well-measured cases to eligible; keep the rest pending with a reason.

    Without a clock (no market data at all) every case is pending `no_market_data`.
    """
    with res.engine.begin() as conn:
        return mature_cases(
            conn,
            res.registry,
            as_of=as_of,
            min_points=res.min_evaluation_points,
            profile=profile or res.profile,
            prices=res.prices,
        )
