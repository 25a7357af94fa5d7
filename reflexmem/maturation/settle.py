"""Settle open positions from their fills and market prices, over the whole batch at once.

A position is settled only when the price source has seen its role's full outcome
horizon: entry is the quantity-weighted fill price (the position's own entry price when
it has no fills), exit is the last close at or before `opened + horizon`, and the
realized return is signed by the decision's direction, net of fees. A position whose
horizon reaches past the newest known bar stays open: settling it early would judge
the role on a shorter horizon than its policy declares.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np
import polars as pl
import sqlalchemy as sa

from reflexmem.ledger.bulk_read import read_frame
from reflexmem.ledger.sqlio import UTC_US, bulk_update, parse_utc
from reflexmem.prices.providers import PriceProvider
from reflexmem.prices.series import (
    PriceSource,
    last_at_or_before,
    series_end,
    window_stats,
)
from reflexmem.registry import RoleRegistry

OPEN_SQL = """
SELECT p.position_id, p.decision_id, p.opened_at, p.entry_price,
       d.symbol, d.direction, d.role_id,
       CASE WHEN p.execution_id IS NULL THEN fd.qty ELSE fx.qty END AS qty,
       CASE WHEN p.execution_id IS NULL THEN fd.notional ELSE fx.notional END AS notional,
       CASE WHEN p.execution_id IS NULL THEN fd.fees ELSE fx.fees END AS fees,
       CASE WHEN p.execution_id IS NULL THEN fd.first_fill ELSE fx.first_fill END AS first_fill
FROM position_lifecycles p
JOIN trading_decisions d ON d.decision_id = p.decision_id
LEFT JOIN (SELECT e.decision_id, SUM(tf.quantity) AS qty,
                  SUM(tf.quantity * tf.price) AS notional, SUM(tf.fee) AS fees,
                  MIN(tf.filled_at) AS first_fill
           FROM trade_fills tf JOIN trade_executions e ON e.execution_id = tf.execution_id
           GROUP BY e.decision_id) fd ON fd.decision_id = p.decision_id
LEFT JOIN (SELECT tf.execution_id, SUM(tf.quantity) AS qty,
                  SUM(tf.quantity * tf.price) AS notional, SUM(tf.fee) AS fees,
                  MIN(tf.filled_at) AS first_fill
           FROM trade_fills tf GROUP BY tf.execution_id) fx ON fx.execution_id = p.execution_id
WHERE p.status = 'open'
"""
"""Open positions with their fills: the named execution's, else all of the decision's."""


@dataclass(frozen=True)
class SettleReport:
    """How many open positions were looked at and how many could be settled."""

    open_positions: int
    settled: int


def load_open_positions(conn: sa.Connection) -> pl.DataFrame:
    """Every open position with its decision's symbol, direction, role and fill totals."""
    raw = read_frame(conn, OPEN_SQL)
    return raw.with_columns(
        parse_utc(pl.col("opened_at")).alias("opened_at"),
        parse_utc(pl.col("first_fill")).alias("first_fill"),
        *[pl.col(c).cast(pl.Float64) for c in ("entry_price", "qty", "notional", "fees")],
    )


def settle_frame(
    positions: pl.DataFrame,
    source: PriceSource,
    horizons: dict[str, int],
    as_of: datetime | None = None,
) -> pl.DataFrame:
    """The settled subset of `positions` with the columns `position_lifecycles` stores.

    `as_of` caps what is known: bars after it do not exist for this settlement, so a
    re-run on historical data settles nothing a run at that time could not have.
    """
    if positions.height == 0:
        return pl.DataFrame()
    pos = positions.with_columns(
        pl.col("role_id").replace_strict(horizons, default=None, return_dtype=pl.Int64).alias("h")
    ).filter(pl.col("h").is_not_null())
    if pos.height == 0:
        return pl.DataFrame()
    qty = pos["qty"].fill_null(0.0).to_numpy()
    notional = pos["notional"].fill_null(0.0).to_numpy()
    with np.errstate(invalid="ignore", divide="ignore"):
        vwap = np.where(qty > 0, notional / qty, np.nan)
    entry = np.where(np.isfinite(vwap), vwap, pos["entry_price"].fill_null(np.nan).to_numpy())
    opened = (
        pos.select(pl.coalesce("first_fill", "opened_at").dt.replace_time_zone(None))
        .to_series()
        .to_numpy()
        .astype("datetime64[us]")
    )
    target = opened + pos["h"].to_numpy().astype("timedelta64[D]").astype("timedelta64[us]")
    symbols = pos["symbol"].to_numpy().astype(str)
    end = series_end(source, symbols)
    if as_of is not None:
        cap = np.datetime64(as_of.astimezone(UTC).replace(tzinfo=None), "us")
        end = np.where(np.isnat(end), end, np.minimum(end, cap))
    exit_ = last_at_or_before(source, symbols, target)
    stats = window_stats(source, symbols, opened, target)
    sign = np.where(pos["direction"].to_numpy() == "long", 1.0, -1.0)
    fees = pos["fees"].fill_null(0.0).to_numpy()
    with np.errstate(invalid="ignore", divide="ignore"):
        fee_rate = np.where(notional > 0, fees / notional, 0.0)
        ret = sign * (exit_.price / entry - 1.0) - fee_rate
    ok = ~np.isnat(end) & (end >= target) & np.isfinite(entry) & (entry > 0) & exit_.known
    ok &= np.isfinite(ret)
    # Never a settlement stamped before the position opened (no bar inside its window).
    stored_open = pos["opened_at"].dt.replace_time_zone(None).to_numpy().astype("datetime64[us]")
    ok &= ~np.isnat(exit_.stamp) & (exit_.stamp >= stored_open)
    return pl.DataFrame(
        {
            "position_id": pos["position_id"].filter(pl.Series(ok)),
            "status": pl.Series(["settled"] * int(ok.sum()), dtype=pl.String),
            "settled_at": pl.Series(exit_.stamp[ok])
            .cast(pl.Datetime("us"))
            .dt.replace_time_zone("UTC"),
            "entry_price": entry[ok],
            "exit_price": exit_.price[ok],
            "realized_return": ret[ok],
            "evaluation_points": stats.bars[ok],
        }
    ).with_columns(pl.col("settled_at").cast(UTC_US))


def settle_open_positions(
    conn: sa.Connection,
    prices: PriceProvider,
    registry: RoleRegistry,
    *,
    as_of: datetime | None = None,
) -> SettleReport:
    """Settle every open position whose role's horizon the price source already covers.

    The prices of every symbol with an open position are loaded in one read.
    """
    positions = load_open_positions(conn)
    source = prices.for_symbols(positions["symbol"].unique().to_list())
    horizons = {rid: r.policy.outcome_probe.horizon_days for rid, r in registry.roles.items()}
    settled = settle_frame(positions, source, horizons, as_of)
    n = bulk_update(conn, "position_lifecycles", "position_id", settled) if settled.height else 0
    return SettleReport(open_positions=positions.height, settled=n)
