"""Stage every not-yet-admitted execution with the evidence its five conditions need.

One set-based query joins each execution to its decision, its preview (and how many
executions claim that preview) and its position; the derived columns are then computed
with polars over the whole batch. The expectation suite checks these columns, so the
suite stays declarative while the evidence is gathered in one pass.
"""

from __future__ import annotations

import polars as pl
import sqlalchemy as sa

from reflexmem.ledger.bulk import read_frame
from reflexmem.ledger.enums import AUTOMATED_ORIGINS, Origin

STAGE_SQL = """
SELECT e.execution_id, e.decision_id, e.preview_id,
       e.account AS e_account, e.market AS e_market, e.symbol AS e_symbol,
       e.direction AS e_direction, e.instrument, e.origin, e.origin_verified,
       e.automation_markers,
       d.role_id, d.account AS d_account, d.market AS d_market, d.symbol AS d_symbol,
       d.direction AS d_direction, d.scenario, d.rationale, d.decided_at,
       p.preview_id AS p_id, p.decision_id AS p_decision_id,
       p.consumed_by_decision_id AS p_consumed_by, p.consume_count,
       p.account AS p_account, p.market AS p_market, p.symbol AS p_symbol,
       p.direction AS p_direction,
       u.uses AS preview_uses,
       pos.settled, pos.points
FROM trade_executions e
JOIN trading_decisions d ON d.decision_id = e.decision_id
LEFT JOIN trade_previews p ON p.preview_id = e.preview_id
LEFT JOIN (SELECT preview_id, COUNT(*) AS uses FROM trade_executions
           WHERE preview_id IS NOT NULL GROUP BY preview_id) u ON u.preview_id = e.preview_id
LEFT JOIN (SELECT decision_id,
                  MAX(CASE WHEN status = 'settled' THEN 1 ELSE 0 END) AS settled,
                  MAX(evaluation_points) AS points
           FROM position_lifecycles GROUP BY decision_id) pos ON pos.decision_id = e.decision_id
WHERE NOT EXISTS (SELECT 1 FROM role_cases rc WHERE rc.execution_id = e.execution_id)
  AND NOT EXISTS (SELECT 1 FROM quarantine q
                  WHERE q.subject_kind = 'execution' AND q.subject_id = e.execution_id)
"""

INT_COLUMNS = ("consume_count", "preview_uses", "settled", "points")
IDENTITY_FIELDS = {
    "asset": "symbol",
    "direction": "direction",
    "account": "account",
    "market": "market",
}


def _markers_present(col: pl.Expr) -> pl.Expr:
    text = col.cast(pl.String).str.strip_chars()
    return text.is_not_null() & ~text.is_in(["", "[]", "null", "{}", '""'])


def _verified(col: pl.Expr) -> pl.Expr:
    return col.cast(pl.String).str.to_lowercase().is_in(["1", "true", "t"])


def derive(raw: pl.DataFrame, *, min_points: int) -> pl.DataFrame:
    """Add the condition columns the admission suite checks (pure, vectorized)."""
    automated = [o.value for o in AUTOMATED_ORIGINS]
    frame = raw.with_columns([pl.col(c).cast(pl.Int64) for c in INT_COLUMNS])
    origin = pl.col("origin")
    origin_class = (
        pl.when(_markers_present(pl.col("automation_markers")) | origin.is_in(automated))
        .then(pl.lit("automated"))
        .when(origin == Origin.UNKNOWN.value)
        .then(pl.lit("unknown"))
        .when((origin == Origin.MANUAL_EXTERNAL.value) & _verified(pl.col("origin_verified")))
        .then(pl.lit("manual_external_verified"))
        .when(origin == Origin.MANUAL_EXTERNAL.value)
        .then(pl.lit("manual_external_unverified"))
        .when(origin == Origin.MANUAL_AGENT.value)
        .then(pl.lit("manual_agent"))
        .otherwise(pl.lit("unknown"))
    )
    preview_state = (
        pl.when(pl.col("p_id").is_null())
        .then(pl.lit("missing"))
        .when(pl.col("consume_count").fill_null(0) < 1)
        .then(pl.lit("unconsumed"))
        .when(pl.col("preview_uses").fill_null(0) > 1)
        .then(pl.lit("reused"))
        .otherwise(pl.lit("consumed_once"))
    )
    has_preview = pl.col("p_id").is_not_null()
    parts = [
        pl.when(
            has_preview
            & (
                pl.col("p_decision_id").ne_missing(pl.col("decision_id"))
                | (
                    pl.col("p_consumed_by").is_not_null()
                    & pl.col("p_consumed_by").ne_missing(pl.col("decision_id"))
                )
            )
        )
        .then(pl.lit("decision_id"))
        .otherwise(None)
    ]
    for label, field in IDENTITY_FIELDS.items():
        e = pl.col(f"e_{field}")
        wrong = pl.col(f"d_{field}").ne_missing(e) | (
            has_preview & pl.col(f"p_{field}").ne_missing(e)
        )
        parts.append(pl.when(wrong).then(pl.lit(label)).otherwise(None))
    identity = pl.concat_str(parts, separator=",", ignore_nulls=True)
    settled = pl.col("settled").fill_null(0) == 1
    settlement = (
        pl.when(settled & (pl.col("points").fill_null(0) >= min_points))
        .then(pl.lit("settled"))
        .when(settled)
        .then(pl.lit("insufficient_data"))
        .otherwise(pl.lit("unsettled"))
    )
    return frame.with_columns(
        origin_class.alias("origin_class"),
        preview_state.alias("preview_state"),
        pl.when(identity == "").then(None).otherwise(identity).alias("identity_mismatch"),
        settlement.alias("settlement"),
    )


def stage_candidates(conn: sa.Connection, *, min_points: int) -> pl.DataFrame:
    """Every execution with neither a role case nor a quarantine row, with its evidence."""
    return derive(read_frame(conn, STAGE_SQL), min_points=min_points)
