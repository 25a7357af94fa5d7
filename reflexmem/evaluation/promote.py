"""Promotion: the one explicit act that makes an evaluation run count.

Exactly one run per (decision, profile) is primary; the partial unique index of
migration 0001 enforces it in the database. Promoting a run demotes the previous
primary, records both in `evaluation_promotions`, and swaps the run's methodology
observations: those rows are what downstream statistics read, so a run that was never
promoted, or was demoted, cannot move any statistic. Every step is one set-based
statement, whatever the number of decisions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import polars as pl
import sqlalchemy as sa

from reflexmem.evaluation.profiles import COMPONENTS
from reflexmem.evaluation.runs import BatchInfo, RunOpener, new_batch_id, record_batch
from reflexmem.ledger.bulk import bulk_insert
from reflexmem.ledger.bulk_read import read_frame
from reflexmem.ledger.sqlio import drop_stage, parse_utc, stage

OBSERVED = ("raw_return", "excess_vs_benchmark", "risk_adjusted", "direction_hit")
"""Components that become methodology observations (the statistics' inputs)."""


class PromotionError(ValueError):
    """A promotion request that cannot leave exactly one primary run per decision."""


@dataclass(frozen=True)
class PromotionResult:
    """One promotion batch: which runs became primary and which they replaced.

    `promotions` also names, per run, its role, profile version, the evaluation batch
    that wrote it (and that batch's tracking run), the decision's symbol and time.
    """

    info: BatchInfo
    mlflow_run_id: str | None
    promotions: pl.DataFrame

    @property
    def promoted(self) -> int:
        """How many runs became primary."""
        return self.promotions.height


def _candidates_sql(
    profile: str,
    version: int | None,
    source_batch: str | None,
    only_unpromoted: bool,
    explicit: bool,
) -> str:
    where = [f"r.profile = '{profile}'"]
    if version is not None:
        where.append(f"r.profile_version = {int(version)}")
    if source_batch is not None:
        if "'" in source_batch:
            raise PromotionError(f"invalid batch id {source_batch!r}")
        where.append(f"l.batch_id = '{source_batch}'")
    if only_unpromoted:
        where.append(
            "NOT EXISTS (SELECT 1 FROM evaluation_runs q WHERE q.decision_id = r.decision_id "
            f"AND q.profile = '{profile}' AND q.is_primary)"
        )
    join = "JOIN _promote_runs pr ON pr.run_id = r.run_id" if explicit else ""
    return f"""
SELECT c.run_id, c.decision_id, c.role_id, cur.run_id AS previous_run_id,
       c.profile_version, c.source_batch, b.mlflow_run_id AS source_mlflow_run_id,
       d.symbol, d.decided_at
FROM (SELECT r.run_id, r.decision_id, l.role_id, r.is_primary, r.profile_version,
             l.batch_id AS source_batch,
             ROW_NUMBER() OVER (PARTITION BY r.decision_id
                                ORDER BY r.created_at DESC, r.run_id DESC) AS rn
      FROM evaluation_runs r
      JOIN evaluation_run_lineage l ON l.run_id = r.run_id
      {join}
      WHERE {" AND ".join(where)}) c
LEFT JOIN evaluation_runs cur
  ON cur.decision_id = c.decision_id AND cur.profile = '{profile}' AND cur.is_primary
LEFT JOIN evaluation_batches b ON b.batch_id = c.source_batch
JOIN trading_decisions d ON d.decision_id = c.decision_id
WHERE c.rn = 1 AND NOT c.is_primary
"""


def promote(
    conn: sa.Connection,
    profile: str,
    *,
    version: int | None = None,
    source_batch: str | None = None,
    run_ids: Sequence[str] | None = None,
    only_unpromoted: bool = False,
    open_run: RunOpener | None = None,
    batch_id: str | None = None,
) -> PromotionResult:
    """Make the newest matching run of each decision primary under `profile`.

    Matching runs are those of `profile` (optionally one `version`, one `source_batch`,
    an explicit `run_ids` list); `only_unpromoted` restricts to decisions without a
    primary yet (the initial promotion after a first evaluation). Naming two runs of
    one decision in `run_ids` is an error, since only one of them could be primary.
    """
    if "'" in profile:
        raise PromotionError(f"invalid profile {profile!r}")
    explicit = run_ids is not None
    if explicit:
        ids = list(dict.fromkeys(run_ids or ()))
        stage(conn, "_promote_runs", pl.DataFrame({"run_id": ids}, schema={"run_id": pl.String}))
        dup = conn.execute(
            sa.text(
                "SELECT r.decision_id, COUNT(*) FROM evaluation_runs r "
                "JOIN _promote_runs p ON p.run_id = r.run_id "
                f"WHERE r.profile = '{profile}' GROUP BY r.decision_id HAVING COUNT(*) > 1"
            )
        ).first()
        if dup is not None:
            drop_stage(conn, "_promote_runs")
            raise PromotionError(
                f"runs for decision {dup[0]!r} named {dup[1]} times: exactly one can be primary"
            )
        found = conn.execute(
            sa.text(
                "SELECT COUNT(*) FROM evaluation_runs r JOIN _promote_runs p "
                f"ON p.run_id = r.run_id WHERE r.profile = '{profile}'"
            )
        ).scalar_one()
        if int(found) != len(ids):
            drop_stage(conn, "_promote_runs")
            raise PromotionError(
                f"{len(ids) - int(found)} of {len(ids)} run id(s) are not runs of {profile!r}"
            )
    sql = _candidates_sql(profile, version, source_batch, only_unpromoted, explicit)
    chosen = read_frame(conn, sql)
    if explicit:
        drop_stage(conn, "_promote_runs")
    bid = batch_id or new_batch_id("promote")
    roles = tuple(sorted(set(chosen["role_id"].to_list())))
    # The batch's version is the promoted runs' own (the newest, should they differ).
    top = chosen["profile_version"].cast(pl.Int64).max()
    promoted_version = top if isinstance(top, int) else 0
    info = BatchInfo("promote", bid, profile, version or promoted_version, roles, chosen.height)
    if chosen.height == 0:
        return PromotionResult(info, None, chosen)
    mlflow_run_id = open_run(info) if open_run is not None else None
    now = datetime.now(UTC)
    frame = chosen.select(
        pl.lit(bid).alias("batch_id"),
        "decision_id",
        pl.lit(profile).alias("profile"),
        "run_id",
        pl.col("previous_run_id").cast(pl.String),
        pl.lit(now).cast(pl.Datetime("us", "UTC")).alias("promoted_at"),
    )
    bulk_insert(conn, "evaluation_promotions", frame)
    this = f"SELECT {{col}} FROM evaluation_promotions WHERE batch_id = '{bid}'"
    prev = this.format(col="previous_run_id") + " AND previous_run_id IS NOT NULL"
    conn.execute(sa.text(f"DELETE FROM methodology_observations WHERE run_id IN ({prev})"))
    conn.execute(sa.text(f"UPDATE evaluation_runs SET is_primary = FALSE WHERE run_id IN ({prev})"))
    conn.execute(
        sa.text(
            "UPDATE evaluation_runs SET is_primary = TRUE "
            f"WHERE run_id IN ({this.format(col='run_id')})"
        )
    )
    names = ", ".join(f"'{c}'" for c in OBSERVED)
    conn.execute(
        sa.text(
            "INSERT INTO methodology_observations (run_id, role_id, metric, value) "
            "SELECT c.run_id, l.role_id, c.name, c.value FROM evaluation_components c "
            "JOIN evaluation_run_lineage l ON l.run_id = c.run_id "
            f"WHERE c.run_id IN ({this.format(col='run_id')}) AND c.name IN ({names}) "
            "AND NOT c.missing AND c.value IS NOT NULL"
        )
    )
    record_batch(conn, info, mlflow_run_id, chosen.height, now)
    lineage = chosen.select(
        "run_id",
        "role_id",
        pl.col("profile_version").cast(pl.Int64),
        pl.col("source_batch").cast(pl.String),
        pl.col("source_mlflow_run_id").cast(pl.String),
        "symbol",
        parse_utc(pl.col("decided_at")).alias("decided_at"),
    )
    return PromotionResult(info, mlflow_run_id, frame.join(lineage, on="run_id"))


assert set(OBSERVED) <= set(COMPONENTS)
