"""Stage the executions a batch must judge, with the evidence every condition needs.

One set-based query joins each execution to its decision, its preview (and how many
executions claim that preview), its own position (`settlement.own_position_joins`) and
its role case if it has one, once per batch (`staged_chunks`); the derived columns are
then computed with polars, chunk by chunk. The expectation suite checks these columns, so
the suite stays declarative while the evidence is gathered in one pass.

A batch stages every execution with neither a role case nor a quarantine row, and
re-stages (*re-judges*) the existing cases whose evidence a later row can have changed:
a case whose preview another execution now claims, a case whose position became
ambiguous, and a pending case whose position is now settled (its settlement may
contradict itself). A re-judged case that fails a critical condition is revoked.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import polars as pl
import sqlalchemy as sa

from reflexmem.ledger.bulk import read_frame
from reflexmem.ledger.enums import AUTOMATED_ORIGINS, Origin
from reflexmem.ledger.sqlio import drop_stage, parse_utc, postgres_settings
from reflexmem.maturation.settlement import (
    AMBIGUOUS_SQL,
    OWN_POSITION_COLUMNS,
    POSITIONS_PER_DECISION,
    POSITIONS_PER_EXECUTION,
    own_position_joins,
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

STAGE_SQL = """
SELECT e.execution_id, e.decision_id, e.preview_id,
       e.account AS e_account, e.market AS e_market, e.symbol AS e_symbol,
       e.direction AS e_direction, e.instrument, e.origin, e.origin_verified,
       CAST(e.automation_markers AS TEXT) AS automation_markers, e.executed_at,
       d.role_id, d.account AS d_account, d.market AS d_market, d.symbol AS d_symbol,
       d.direction AS d_direction, d.scenario, d.decided_at,
       p.preview_id AS p_id, p.decision_id AS p_decision_id,
       p.consumed_by_decision_id AS p_consumed_by, p.consume_count,
       p.account AS p_account, p.market AS p_market, p.symbol AS p_symbol,
       p.direction AS p_direction, p.created_at AS p_created_at,
       p.consumed_at AS p_consumed_at,
       {preview_uses} AS preview_uses,
       rc.case_id, rc.state AS case_state, rc.batch_id AS case_batch_id,
       {own_position_columns}
FROM trade_executions e
JOIN trading_decisions d ON d.decision_id = e.decision_id
LEFT JOIN trade_previews p ON p.preview_id = e.preview_id
LEFT JOIN role_cases rc ON rc.execution_id = e.execution_id
{own_position}
WHERE NOT EXISTS (SELECT 1 FROM quarantine q
                  WHERE q.subject_kind = 'execution' AND q.subject_id = e.execution_id)
  AND (rc.case_id IS NULL
       OR {preview_uses} > 1
       OR {ambiguous}
       OR (rc.state = 'pending' AND pos.status = 'settled'))
"""
"""The staging query, given the joins that pick each execution's own position."""

COUNTS_BY_EXECUTION = "admit_positions_by_execution"
COUNTS_BY_DECISION = "admit_positions_by_decision"


STAGED = "admit_staged"
STAGE_WORK_MEM = "64MB"
"""PostgreSQL's memory per hash or sort while a batch is staged (its default: 4 MB).

The counts and the staging query hash-join whole tables, once per batch. With 4 MB
those joins spill to disk in batches as the ledger grows: at 1e6 executions, staging
cost more per execution than at 1e5 and kept admission superlinear in N. Raised for
those statements only (`sqlio.postgres_settings`), on one connection.
"""


def _temporary(conn: sa.Connection, name: str, select: str, key: str) -> None:
    """`select` into a keyed temporary table, analysed on PostgreSQL."""
    pg = conn.dialect.name == "postgresql"
    drop_stage(conn, name)
    on_commit = " ON COMMIT DROP" if pg else ""
    conn.execute(sa.text(f"CREATE TEMPORARY TABLE {name}{on_commit} AS {select}"))
    conn.execute(sa.text(f"CREATE UNIQUE INDEX {name}_key ON {name} ({key})"))
    if pg:  # autovacuum never analyses temporary tables
        conn.execute(sa.text(f"ANALYZE {name}"))


COUNTS = {
    COUNTS_BY_EXECUTION: (
        "SELECT e.execution_id, c.n, c.pid FROM trade_executions e "
        f"LEFT JOIN ({POSITIONS_PER_EXECUTION}) c ON c.execution_id = e.execution_id",
        "execution_id",
    ),
    COUNTS_BY_DECISION: (POSITIONS_PER_DECISION, "decision_id"),
}
"""The batch's position counts: whole-ledger aggregates, taken once per batch."""


def staged_chunks(
    conn: sa.Connection, *, min_points: int, chunk_rows: int
) -> Iterator[pl.DataFrame]:
    """The batch's executions to judge, staged as of this instant, in key-range chunks.

    Every execution needs its position counts, which are whole-ledger aggregates: they
    are taken once into two indexed temporary tables (`COUNTS`). A batch of at most
    `chunk_rows` executions is then one chunk, read straight from the staging query. A
    larger one is staged once into a third table (`STAGED`) and read a key range at a
    time: staged per chunk, PostgreSQL's planner hash-joined every chunk with full scans
    of decisions, previews, positions and the counts, O(N) per chunk and O(N^2 / chunk)
    per batch. The batch judges the ledger as of that instant: a row ingested later is
    judged, or re-judged through the preview-reuse and ambiguity rules, by the next
    batch. Every condition is per execution, so what a chunk writes never changes what a
    later chunk reads. On an error the rollback that follows takes the tables with it.
    """
    with postgres_settings(conn, work_mem=STAGE_WORK_MEM):
        for name, (select, key) in COUNTS.items():
            _temporary(conn, name, select, key)
        joins = own_position_joins(COUNTS_BY_EXECUTION, COUNTS_BY_DECISION, execution_join="JOIN")
        count = conn.execute(sa.text(f"SELECT COUNT(*) FROM {COUNTS_BY_EXECUTION}")).scalar()
        one_chunk = int(count or 0) <= chunk_rows
        if one_chunk:
            staged = read_frame(conn, _stage_sql(joins) + " ORDER BY e.execution_id")
        else:
            _temporary(conn, STAGED, _stage_sql(joins), "execution_id")
    if one_chunk:
        yield derive(staged, min_points=min_points)
    else:
        after: str | None = None
        while True:
            through = _chunk_end(conn, after, chunk_rows)
            yield _staged_range(conn, after, through, min_points)
            if through is None:
                break
            after = through
        drop_stage(conn, STAGED)
    for name in COUNTS:
        drop_stage(conn, name)


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


def _chunk_end(conn: sa.Connection, after: str | None, rows: int) -> str | None:
    """The last of the next `rows` staged executions after `after`; None when fewer remain."""
    where = "" if after is None else "WHERE execution_id > :after"
    return conn.execute(
        sa.text(
            f"SELECT execution_id FROM {STAGED} {where} "
            f"ORDER BY execution_id LIMIT 1 OFFSET {max(int(rows), 1) - 1}"
        ),
        {"after": after},
    ).scalar_one_or_none()


def _key(conn: sa.Connection, value: str) -> str:
    return str(
        sa.literal(value, sa.String).compile(
            dialect=conn.dialect, compile_kwargs={"literal_binds": True}
        )
    )


def _stage_sql(own_position: str) -> str:
    return STAGE_SQL.format(
        preview_uses=PREVIEW_USES,
        own_position_columns=OWN_POSITION_COLUMNS,
        own_position=own_position,
        ambiguous=AMBIGUOUS_SQL,
    )


def stage_candidates(conn: sa.Connection, *, min_points: int) -> pl.DataFrame:
    """Every execution a batch would judge now, with its evidence, in one frame."""
    return pl.concat(list(staged_chunks(conn, min_points=min_points, chunk_rows=sys.maxsize)))


def _staged_range(
    conn: sa.Connection, after: str | None, through: str | None, min_points: int
) -> pl.DataFrame:
    """The staged executions whose IDs lie in (after, through], derived."""
    bounds = [
        f"execution_id {op} {_key(conn, value)}"
        for op, value in ((">", after), ("<=", through))
        if value is not None
    ]
    where = f" WHERE {' AND '.join(bounds)}" if bounds else ""
    sql = f"SELECT * FROM {STAGED}{where} ORDER BY execution_id"
    return derive(read_frame(conn, sql), min_points=min_points)
