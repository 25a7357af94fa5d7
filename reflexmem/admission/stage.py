"""Stage the executions a batch must judge, with the evidence every condition needs.

One set-based query joins each execution to its decision, its preview (and how many
executions claim that preview), its own position (`settlement.OWN_POSITION_JOINS`) and
its role case if it has one; the derived columns are then computed with polars over the
whole batch. The expectation suite checks these columns, so the suite stays declarative
while the evidence is gathered in one pass.

A batch stages every execution with neither a role case nor a quarantine row, and
re-stages (*re-judges*) the existing cases whose evidence a later row can have changed:
a case whose preview another execution now claims, a case whose position became
ambiguous, and a pending case whose position is now settled (its settlement may
contradict itself). A re-judged case that fails a critical condition is revoked.
"""

from __future__ import annotations

import polars as pl
import sqlalchemy as sa

from reflexmem.ledger.bulk import read_frame
from reflexmem.ledger.enums import AUTOMATED_ORIGINS, Origin
from reflexmem.ledger.sqlio import parse_utc
from reflexmem.maturation.settlement import (
    AMBIGUOUS_SQL,
    OWN_POSITION_COLUMNS,
    OWN_POSITION_JOINS,
    settlement_columns,
    typed_positions,
)

PREVIEW_USES = (
    "(CASE WHEN e.preview_id IS NULL THEN NULL ELSE (SELECT COUNT(*) FROM trade_executions x "
    "WHERE x.preview_id = e.preview_id) END)"
)
"""Executions claiming the execution's preview (NULL without one), one index lookup per
execution (`ix_trade_executions_preview_id`): a whole-ledger GROUP BY here was recomputed
for every chunk, a cost of O(N) per chunk and O(N^2 / chunk) per batch."""

STAGE_SQL = f"""
SELECT e.execution_id, e.decision_id, e.preview_id,
       e.account AS e_account, e.market AS e_market, e.symbol AS e_symbol,
       e.direction AS e_direction, e.instrument, e.origin, e.origin_verified,
       CAST(e.automation_markers AS TEXT) AS automation_markers, e.executed_at,
       d.role_id, d.account AS d_account, d.market AS d_market, d.symbol AS d_symbol,
       d.direction AS d_direction, d.scenario, d.rationale, d.decided_at,
       p.preview_id AS p_id, p.decision_id AS p_decision_id,
       p.consumed_by_decision_id AS p_consumed_by, p.consume_count,
       p.account AS p_account, p.market AS p_market, p.symbol AS p_symbol,
       p.direction AS p_direction, p.created_at AS p_created_at,
       p.consumed_at AS p_consumed_at,
       {PREVIEW_USES} AS preview_uses,
       rc.case_id, rc.state AS case_state, rc.batch_id AS case_batch_id,
       {OWN_POSITION_COLUMNS}
FROM trade_executions e
JOIN trading_decisions d ON d.decision_id = e.decision_id
LEFT JOIN trade_previews p ON p.preview_id = e.preview_id
LEFT JOIN role_cases rc ON rc.execution_id = e.execution_id
{OWN_POSITION_JOINS}
WHERE NOT EXISTS (SELECT 1 FROM quarantine q
                  WHERE q.subject_kind = 'execution' AND q.subject_id = e.execution_id)
  AND (rc.case_id IS NULL
       OR {PREVIEW_USES} > 1
       OR {AMBIGUOUS_SQL}
       OR (rc.state = 'pending' AND pos.status = 'settled'))
"""

INT_COLUMNS = ("consume_count", "preview_uses")
STAMPS = ("executed_at", "decided_at", "p_created_at", "p_consumed_at")
IDENTITY_FIELDS = {
    "asset": "symbol",
    "direction": "direction",
    "account": "account",
    "market": "market",
}


def markers_state(col: pl.Expr) -> pl.Expr:
    """`absent` (SQL or JSON null), `empty` (`[]`), `present` (a non-empty list), `malformed`.

    Only a JSON list is a list of markers; a string (even `""`), an object (even `{}`),
    a number or text that is not JSON is malformed, never "no marker" (fail-closed).
    """
    text = col.cast(pl.String)
    normal = text.str.json_path_match("$")
    absent = text.is_null() | (text.str.strip_chars() == "null")
    is_list = normal.str.starts_with("[").fill_null(False)
    return (
        pl.when(absent)
        .then(pl.lit("absent"))
        .when(is_list & (normal == "[]"))
        .then(pl.lit("empty"))
        .when(is_list)
        .then(pl.lit("present"))
        .otherwise(pl.lit("malformed"))
    )


def _verified(col: pl.Expr) -> pl.Expr:
    return col.cast(pl.String).str.to_lowercase().is_in(["1", "true", "t"])


def _time_order() -> list[pl.Expr]:
    """Decision, preview, consumption and execution in the only order a manual trade has."""
    executed = pl.col("executed_at")
    created = pl.col("p_created_at")
    consumed = pl.col("p_consumed_at")
    has_preview = pl.col("p_id").is_not_null()
    return [
        pl.when(executed.is_not_null() & (executed >= pl.col("decided_at")))
        .then(pl.lit("ok"))
        .otherwise(pl.lit("executed_before_decision"))
        .alias("execution_time"),
        pl.when(~has_preview)
        .then(pl.lit("n/a"))
        .when(created.is_not_null() & (created <= executed))
        .then(pl.lit("ok"))
        .otherwise(pl.lit("preview_after_execution"))
        .alias("preview_time"),
        pl.when(~has_preview | consumed.is_null())
        .then(pl.lit("n/a"))
        .when((consumed >= created) & (consumed <= executed))
        .then(pl.lit("ok"))
        .otherwise(pl.lit("consumption_out_of_order"))
        .alias("consumption_time"),
    ]


def _identity() -> pl.Expr:
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
    return pl.concat_str(parts, separator=",", ignore_nulls=True)


def derive(raw: pl.DataFrame, *, min_points: int) -> pl.DataFrame:
    """Add the condition columns the admission suite checks (pure, vectorized).

    `raw` is text as `read_frame` returns it (the property test builds it the same way);
    origins and role IDs are compared exactly as stored.
    """
    automated = [o.value for o in AUTOMATED_ORIGINS]
    frame = typed_positions(
        raw.with_columns(
            *[pl.col(c).cast(pl.Int64) for c in INT_COLUMNS],
            *[parse_utc(pl.col(c).cast(pl.String)).alias(c) for c in STAMPS],
        )
    ).with_columns(markers_state(pl.col("automation_markers")).alias("markers_state"))
    origin = pl.col("origin")
    markers = pl.col("markers_state")
    origin_class = (
        pl.when((markers == "present") | origin.is_in(automated))
        .then(pl.lit("automated"))
        .when((origin == Origin.UNKNOWN.value) | (markers == "malformed"))
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
    identity = _identity()
    return frame.with_columns(
        origin_class.alias("origin_class"),
        preview_state.alias("preview_state"),
        pl.when(identity == "").then(None).otherwise(identity).alias("identity_mismatch"),
        *_time_order(),
        *settlement_columns(min_points),
    )


def stage_candidates(
    conn: sa.Connection,
    *,
    min_points: int,
    after: str | None = None,
    limit: int | None = None,
) -> pl.DataFrame:
    """Executions to judge (new ones, and cases to re-judge), with their evidence.

    With `limit`, one chunk in execution-ID order: the first `limit` executions after
    `after` (keyset pagination, so a chunk never depends on what earlier chunks wrote:
    every condition is per execution, its counts come from the whole ledger).
    """
    sql = STAGE_SQL
    if after is not None:
        key = sa.literal(after, sa.String).compile(
            dialect=conn.dialect, compile_kwargs={"literal_binds": True}
        )
        sql += f" AND e.execution_id > {key}"
    if limit is not None:
        sql += f" ORDER BY e.execution_id LIMIT {int(limit)}"
    return derive(read_frame(conn, sql), min_points=min_points)
