"""Downstream statistics: per role and metric, from primary runs only.

The statistic reads `methodology_observations`, which promotion alone writes, and joins
back to `evaluation_runs` on `is_primary` as a second guard: even an observation left
behind by a bug could not make an unpromoted or legacy run count.
"""

from __future__ import annotations

import polars as pl
import sqlalchemy as sa

from reflexmem.ledger.bulk_read import read_frame

STATS_SQL = """
SELECT o.role_id, o.metric, COUNT(*) AS n, AVG(o.value) AS mean,
       MIN(o.value) AS min, MAX(o.value) AS max
FROM methodology_observations o
JOIN evaluation_runs r ON r.run_id = o.run_id AND r.is_primary
WHERE r.profile = '{profile}'
GROUP BY o.role_id, o.metric
ORDER BY o.role_id, o.metric
"""


def role_statistics(conn: sa.Connection, profile: str) -> pl.DataFrame:
    """Count, mean, min and max of each observed metric per role under `profile`."""
    if "'" in profile:
        raise ValueError(f"invalid profile {profile!r}")
    raw = read_frame(conn, STATS_SQL.format(profile=profile))
    return raw.with_columns(
        pl.col("n").cast(pl.Int64), *[pl.col(c).cast(pl.Float64) for c in ("mean", "min", "max")]
    )
