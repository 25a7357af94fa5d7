"""An execution's own position and what its settlement says, written once.

Admission and maturation both judge an execution by *its own* position, never by a
maximum over its decision's positions. A position belongs to an execution when it names
that execution (`position_lifecycles.execution_id`); a position that names none belongs
to its decision's executions only when it is the decision's only position. Any other
shape (two positions naming the execution, or several positions of the decision and at
least one unassigned) is ambiguous, and an ambiguous execution is quarantined.

`OWN_POSITION_JOINS` is the SQL that picks the position (joined onto an execution `e`),
`position_link` classifies the same counts in polars, and `settlement_columns` reads
what a settled position states: a settlement stamp not before the opening, a finite
realized return or (without one) finite positive entry and exit prices it follows from,
and its own evaluation points. The SQL pick and the polars classification implement one
rule; `tests/integration/test_admission_fail_closed.py` holds them to each other.
"""

from __future__ import annotations

import polars as pl

POSITIONS_PER_EXECUTION = (
    "SELECT execution_id, COUNT(*) AS n, MIN(position_id) AS pid FROM position_lifecycles "
    "WHERE execution_id IS NOT NULL GROUP BY execution_id"
)
POSITIONS_PER_DECISION = (
    "SELECT decision_id, COUNT(*) AS n, "
    "SUM(CASE WHEN execution_id IS NULL THEN 1 ELSE 0 END) AS nf, MIN(position_id) AS pid "
    "FROM position_lifecycles GROUP BY decision_id"
)


def own_position_joins(
    per_execution: str = f"({POSITIONS_PER_EXECUTION})",
    per_decision: str = f"({POSITIONS_PER_DECISION})",
    *,
    execution_join: str = "LEFT JOIN",
) -> str:
    """Joins `pos` (the execution's own position, if exactly one) and its counts onto `e`.

    The counts `pe` and `pd` come from the two relations given: by default the
    whole-ledger aggregates, computed by the query that uses them; admission passes the
    tables it took them into once per batch, joined with `execution_join = "JOIN"` so
    that its rows also name the executions the batch may judge.
    """
    return f"""
{execution_join} {per_execution} pe ON pe.execution_id = e.execution_id
LEFT JOIN {per_decision} pd ON pd.decision_id = e.decision_id
LEFT JOIN position_lifecycles pos ON pos.position_id = CASE
    WHEN pe.n = 1 THEN pe.pid
    WHEN pe.n IS NULL AND pd.n = 1 AND pd.nf = 1 THEN pd.pid END
"""


OWN_POSITION_JOINS = own_position_joins()
"""`own_position_joins` over the whole ledger (one query that reads it once)."""

OWN_POSITION_COLUMNS = """
pe.n AS pos_own, pd.n AS pos_all, pd.nf AS pos_free, pos.position_id,
pos.status AS pos_status, pos.opened_at AS pos_opened_at, pos.settled_at AS pos_settled_at,
pos.realized_return AS pos_return, pos.entry_price AS pos_entry, pos.exit_price AS pos_exit,
pos.evaluation_points AS points
"""

AMBIGUOUS_SQL = "(pe.n > 1 OR (pe.n IS NULL AND pd.n > 1 AND pd.nf > 0))"
"""The execution's position is ambiguous (the same rule as `position_link`)."""

INT_COLUMNS = ("pos_own", "pos_all", "pos_free", "points")
FLOAT_COLUMNS = ("pos_return", "pos_entry", "pos_exit")
STAMP_COLUMNS = ("pos_opened_at", "pos_settled_at")


def position_link() -> pl.Expr:
    """`one`, `none` or `ambiguous`, from the counts `OWN_POSITION_JOINS` returns."""
    own = pl.col("pos_own").fill_null(0)
    every = pl.col("pos_all").fill_null(0)
    free = pl.col("pos_free").fill_null(0)
    return (
        pl.when(own == 1)
        .then(pl.lit("one"))
        .when(own > 1)
        .then(pl.lit("ambiguous"))
        .when((every == 1) & (free == 1))
        .then(pl.lit("one"))
        .when((every > 1) & (free > 0))
        .then(pl.lit("ambiguous"))
        .otherwise(pl.lit("none"))
    )


def _finite(name: str) -> pl.Expr:
    return pl.col(name).is_not_null() & pl.col(name).is_finite()


def settlement_columns(min_points: int) -> list[pl.Expr]:
    """`position_link`, `settlement_time`, `settlement_return` and `settlement`.

    Needs the `OWN_POSITION_COLUMNS` typed (stamps as UTC datetimes, counts as Int64,
    prices and returns as Float64). The first three are critical conditions (`ok`, or
    `n/a` when there is no single settled position); `settlement` is `settled`,
    `insufficient_data` or `unsettled` and only decides pending versus eligible.
    """
    link = position_link()
    settled = (link == "one") & (pl.col("pos_status") == "settled")
    in_order = pl.col("pos_settled_at").is_not_null() & (
        pl.col("pos_settled_at") >= pl.col("pos_opened_at")
    )
    prices = (
        _finite("pos_entry")
        & _finite("pos_exit")
        & (pl.col("pos_entry") > 0)
        & (pl.col("pos_exit") > 0)
    )
    has_return = _finite("pos_return") | (pl.col("pos_return").is_null() & prices)
    enough = pl.col("points").fill_null(0) >= min_points
    return [
        link.alias("position_link"),
        pl.when(~settled)
        .then(pl.lit("n/a"))
        .when(in_order)
        .then(pl.lit("ok"))
        .otherwise(pl.lit("settled_before_open"))
        .alias("settlement_time"),
        pl.when(~settled)
        .then(pl.lit("n/a"))
        .when(has_return)
        .then(pl.lit("ok"))
        .otherwise(pl.lit("invalid"))
        .alias("settlement_return"),
        pl.when(settled & enough)
        .then(pl.lit("settled"))
        .when(settled)
        .then(pl.lit("insufficient_data"))
        .otherwise(pl.lit("unsettled"))
        .alias("settlement"),
    ]


def typed_positions(frame: pl.DataFrame) -> pl.DataFrame:
    """Cast the text `read_frame` returns for `OWN_POSITION_COLUMNS` to their types."""
    from reflexmem.ledger.sqlio import parse_utc

    return frame.with_columns(
        *[pl.col(c).cast(pl.Int64) for c in INT_COLUMNS],
        *[pl.col(c).cast(pl.Float64) for c in FLOAT_COLUMNS],
        *[parse_utc(pl.col(c).cast(pl.String)).alias(c) for c in STAMP_COLUMNS],
    )
