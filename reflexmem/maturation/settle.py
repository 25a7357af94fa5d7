"""Settle open positions from their fills and market prices, over the whole batch at once.

A position is settled only when the price source has seen its role's full outcome
horizon, counted in bars of the decision's symbol (daily or intraday, as ingested): the
entry bar is the first bar at or after the opening (the first fill, else the position's
opening), the exit is the close of the horizon's N-th bar after it, so a weekend or a
holiday inside the horizon costs nothing. Entry is the quantity-weighted fill price (the
position's own entry price when it has no fills), and the realized return is signed by
the decision's direction, net of fees. `evaluation_points` is N: the bars after the
entry bar through the exit bar, one return each. A position whose N-th bar is not known
yet (or only after `as_of`) stays open: settling it early would judge the role on a
shorter horizon than its policy declares.
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
from reflexmem.prices.series import PriceSource, bars_after
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

    `horizons` maps a role to its outcome horizon in bars. `as_of` caps what is known:
    bars after it do not exist for this settlement, so a re-run on historical data
    settles nothing a run at that time could not have.
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
    symbols = pos["symbol"].to_numpy().astype(str)
    horizon = bars_after(source, symbols, opened, pos["h"].to_numpy())
    exit_ = horizon.exit
    sign = np.where(pos["direction"].to_numpy() == "long", 1.0, -1.0)
    fees = pos["fees"].fill_null(0.0).to_numpy()
    with np.errstate(invalid="ignore", divide="ignore"):
        fee_rate = np.where(notional > 0, fees / notional, 0.0)
        ret = sign * (exit_.price / entry - 1.0) - fee_rate
    ok = exit_.known & np.isfinite(entry) & (entry > 0) & np.isfinite(ret)
    if as_of is not None:
        cap = np.datetime64(as_of.astimezone(UTC).replace(tzinfo=None), "us")
        ok &= exit_.stamp <= cap
    # Never a settlement stamped before the position opened (no bar inside its window).
    stored_open = pos["opened_at"].dt.replace_time_zone(None).to_numpy().astype("datetime64[us]")
    ok &= ~np.isnat(exit_.stamp) & (exit_.stamp >= stored_open)
    points = exit_.index - horizon.entry.index
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
            "evaluation_points": points[ok],
        }
    ).with_columns(pl.col("settled_at").cast(UTC_US))


def settle_open_positions(
    conn: sa.Connection,
    prices: PriceProvider,
    registry: RoleRegistry,
    *,
    as_of: datetime | None = None,
) -> SettleReport:
    """Settle every open position whose role's horizon (in bars) the price source covers.

    The prices of every symbol with an open position are loaded in one read.
    """
    positions = load_open_positions(conn)
    source = prices.for_symbols(positions["symbol"].unique().to_list())
    horizons = {rid: r.policy.outcome_probe.horizon_bars for rid, r in registry.roles.items()}
    settled = settle_frame(positions, source, horizons, as_of)
    n = bulk_update(conn, "position_lifecycles", "position_id", settled) if settled.height else 0
    return SettleReport(open_positions=positions.height, settled=n)
