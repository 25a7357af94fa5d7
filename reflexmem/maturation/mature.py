"""The maturity decision: when a role case may be evaluated and reflected on.

A case matures only when all three hold, checked in this order so the reason names
the first thing to wait for:

1. its role's maturation period has passed since the decision (`not_due`),
2. its execution's own position is settled, and the settlement is consistent (see
   `reflexmem.maturation.settlement`; `unsettled` otherwise; `no_market_data` when the
   price source has no bar of the symbol, or none in the position's window although it
   has later ones: waiting will not settle it, prices must be supplied),
3. the settlement saw at least `min_points` price bars (`insufficient_data`).

Without a clock at all (no bar in the price source) every candidate is `no_market_data`.

Matured cases become `eligible`; the others stay (or become) `pending` with the reason.
Candidates are pending cases waiting on one of those reasons and eligible cases that
no evaluation run under the profile covers yet (admission marks a case eligible from
its settlement alone and does not know the role's maturation period). Cases deferred by
the budget are already mature and are left to reflection. Re-running the check on the
same ledger changes nothing, which is what makes a crashed flow safe to re-run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
import polars as pl
import sqlalchemy as sa

from reflexmem.ledger.bulk_read import read_frame
from reflexmem.ledger.enums import CaseState, PendingReason
from reflexmem.ledger.sqlio import bulk_update, parse_utc
from reflexmem.maturation.settlement import (
    OWN_POSITION_COLUMNS,
    OWN_POSITION_JOINS,
    settlement_columns,
    typed_positions,
)
from reflexmem.prices.providers import PriceProvider
from reflexmem.prices.series import Unsettled, bars_after, unsettled_reasons
from reflexmem.registry import RoleRegistry

CANDIDATES_SQL = f"""
SELECT rc.case_id, rc.decision_id, rc.role_id, rc.symbol, rc.state, rc.pending_reason,
       rc.matured_at, d.decided_at, {OWN_POSITION_COLUMNS}
FROM role_cases rc
JOIN trading_decisions d ON d.decision_id = rc.decision_id
JOIN trade_executions e ON e.execution_id = rc.execution_id
{OWN_POSITION_JOINS}
WHERE (rc.state = 'pending' AND rc.pending_reason IN
       ('not_due', 'unsettled', 'insufficient_data', 'no_market_data'))
   OR (rc.state = 'eligible' AND NOT EXISTS (
        SELECT 1 FROM evaluation_runs r
        WHERE r.decision_id = rc.decision_id AND r.profile = '{{profile}}'))
"""
"""Candidates with their execution's own position (`admission.settlement`)."""


@dataclass(frozen=True)
class MaturityReport:
    """Counts of one maturity check: candidates, newly matured, still pending by reason."""

    candidates: int
    matured: int
    changed: int
    pending: dict[str, int] = field(default_factory=dict)


def _due(maturation_days: dict[str, int]) -> tuple[pl.Expr, pl.Expr]:
    """A case's role maturation period in days (null: unknown role) and its due time."""
    days = pl.col("role_id").replace_strict(maturation_days, default=None, return_dtype=pl.Int64)
    return days, pl.col("decided_at") + pl.duration(days=days)


def decide_maturity(
    cases: pl.DataFrame,
    maturation_days: dict[str, int],
    *,
    as_of: datetime | None,
    min_points: int,
) -> pl.DataFrame:
    """Add `new_state` and `new_reason` to candidate rows (pure, vectorized).

    `cases` needs role_id, decided_at (UTC), settled (0/1, null = no position) and
    points. A role missing from `maturation_days` cannot mature: the registry is the
    only source of a role's policy, so such a case is kept `not_due` instead of guessed.
    """
    days, due_at = _due(maturation_days)
    if as_of is None:  # no clock: no bar exists, nothing can be judged
        return cases.with_columns(
            pl.lit(PendingReason.NO_MARKET_DATA.value).alias("new_reason"),
            pl.lit(CaseState.PENDING.value).alias("new_state"),
        )
    else:
        due = days.is_not_null() & (due_at <= pl.lit(as_of).dt.convert_time_zone("UTC"))
    settled = pl.col("settled").fill_null(0) == 1
    enough = pl.col("points").fill_null(0) >= min_points
    reason = (
        pl.when(~due)
        .then(pl.lit(PendingReason.NOT_DUE.value))
        .when(~settled)
        .then(pl.lit(PendingReason.UNSETTLED.value))
        .when(~enough)
        .then(pl.lit(PendingReason.INSUFFICIENT_DATA.value))
        .otherwise(pl.lit(None, dtype=pl.String))
    )
    return cases.with_columns(reason.alias("new_reason")).with_columns(
        pl.when(pl.col("new_reason").is_null())
        .then(pl.lit(CaseState.ELIGIBLE.value))
        .otherwise(pl.lit(CaseState.PENDING.value))
        .alias("new_state")
    )


def valid_from(maturation_days: dict[str, int]) -> pl.Expr:
    """The valid time of a matured case's outcome; null while it is not mature.

    The earliest clock at which `decide_maturity` matures it: its role's maturation
    period after the decision, and not before its position settled (settlement never
    stamps a bar after the clock it ran at). It depends on the data alone, so a cycle
    run live at each clock and one back-filled later stamp the same time.
    """
    _, due_at = _due(maturation_days)
    return (
        pl.when(pl.col("new_state") == CaseState.ELIGIBLE.value)
        .then(pl.max_horizontal(due_at, pl.col("settled_at")))
        .otherwise(None)
        .cast(pl.Datetime("us", "UTC"))
    )


def name_missing_data(
    decided: pl.DataFrame, prices: PriceProvider, horizons: dict[str, int]
) -> pl.DataFrame:
    """Keep `no_market_data` cases pending: prices can never settle or measure them.

    Looked at: unsettled cases (the window ends at the N-th bar of the symbol after the
    entry bar, N the role's outcome horizon in bars, as settlement computes it; while
    that bar is not known the case is awaiting prices, unless the symbol has no bar at
    all) and cases about to mature (the window ends at the ingested settlement): a case
    whose symbol has no bar in its window would be evaluated on nothing, so it waits for
    prices instead. One price read for the symbols of those cases.
    """
    waiting = decided.with_row_index("_i").filter(
        (pl.col("new_reason") == PendingReason.UNSETTLED.value)
        | (pl.col("new_state") == CaseState.ELIGIBLE.value)
    )
    if waiting.height == 0:
        return decided
    source = prices.for_symbols(waiting["symbol"].unique().to_list())
    opened = waiting.select(
        pl.coalesce("opened_at", "decided_at").dt.replace_time_zone(None)
    ).to_series()
    h = waiting["role_id"].replace_strict(horizons, default=-1, return_dtype=pl.Int64)
    opened_np = opened.to_numpy().astype("datetime64[us]")
    symbols = waiting["symbol"].to_numpy().astype(str)
    horizon_end = bars_after(source, symbols, opened_np, h.to_numpy()).exit.stamp
    settled_np = (
        waiting["settled_at"].dt.replace_time_zone(None).to_numpy().astype("datetime64[us]")
    )
    target = np.where(np.isnat(settled_np), horizon_end, settled_np)
    reasons = unsettled_reasons(source, symbols, opened_np, target)
    missing = pl.Series(reasons == Unsettled.NO_MARKET_DATA.value)
    hit = pl.col("_i").is_in(waiting.filter(missing)["_i"].implode())
    return (
        decided.with_row_index("_i")
        .with_columns(
            pl.when(hit)
            .then(pl.lit(PendingReason.NO_MARKET_DATA.value))
            .otherwise(pl.col("new_reason"))
            .alias("new_reason"),
            pl.when(hit)
            .then(pl.lit(CaseState.PENDING.value))
            .otherwise(pl.col("new_state"))
            .alias("new_state"),
        )
        .drop("_i")
    )


def load_candidates(conn: sa.Connection, profile: str, min_points: int = 0) -> pl.DataFrame:
    """Cases the maturity check looks at (see the module docstring).

    `settled` is 1 only when the case's own position is settled *and* its settlement is
    consistent (stamped after the opening, with a finite return): a settlement that
    contradicts itself never matures a case; the next admission batch revokes it.
    """
    if "'" in profile:
        raise ValueError(f"invalid profile name {profile!r}")
    raw = read_frame(conn, CANDIDATES_SQL.format(profile=profile))
    frame = typed_positions(raw).with_columns(settlement_columns(min_points))
    consistent = (
        (pl.col("settlement") != "unsettled")
        & (pl.col("settlement_time") == "ok")
        & (pl.col("settlement_return") == "ok")
    )
    return frame.with_columns(
        parse_utc(pl.col("decided_at")).alias("decided_at"),
        parse_utc(pl.col("matured_at").cast(pl.String)).alias("matured_at"),
        pl.col("pos_opened_at").alias("opened_at"),
        pl.col("pos_settled_at").alias("settled_at"),
        consistent.cast(pl.Int64).alias("settled"),
        pl.when(consistent).then(pl.col("points")).otherwise(0).alias("points"),
    )


def mature_cases(
    conn: sa.Connection,
    registry: RoleRegistry,
    *,
    as_of: datetime | None,
    min_points: int,
    profile: str,
    prices: PriceProvider | None = None,
) -> MaturityReport:
    """Apply the maturity decision to every candidate case and write what changed."""
    cases = load_candidates(conn, profile, min_points)
    days = {rid: r.policy.maturation.days for rid, r in registry.roles.items()}
    decided = decide_maturity(cases, days, as_of=as_of, min_points=min_points)
    if prices is not None:
        horizons = {rid: r.policy.outcome_probe.horizon_bars for rid, r in registry.roles.items()}
        decided = name_missing_data(decided, prices, horizons)
    decided = decided.with_columns(valid_from(days).alias("new_matured_at"))
    changed = decided.filter(
        (pl.col("new_state") != pl.col("state"))
        | pl.col("new_reason").ne_missing(pl.col("pending_reason"))
        | pl.col("new_matured_at").ne_missing(pl.col("matured_at"))
    ).select(
        "case_id",
        pl.col("new_state").alias("state"),
        pl.col("new_reason").alias("pending_reason"),
        pl.col("new_matured_at").alias("matured_at"),
    )
    bulk_update(conn, "role_cases", "case_id", changed)
    pending = (
        decided.filter(pl.col("new_reason").is_not_null())
        .group_by("new_reason")
        .len()
        .sort("new_reason")
    )
    return MaturityReport(
        candidates=cases.height,
        matured=int((decided["new_state"] == CaseState.ELIGIBLE.value).sum())
        if decided.height
        else 0,
        changed=changed.height,
        pending={str(r): int(n) for r, n in pending.iter_rows()},
    )
