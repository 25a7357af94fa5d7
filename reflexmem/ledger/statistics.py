"""Planner statistics after bulk writes: PostgreSQL must know what a batch added.

Autovacuum's analyze may be switched off or simply late. After a bulk load of
thousands of rows the planner still believes the loaded tables are small, and a join
over them picks a plan that reads millions of rows: the episode query of the role
stream took 61.7 s per call on a freshly loaded stack and 0.12 s after one `ANALYZE`.
So every operation that bulk-writes calls :func:`refresh_statistics` once per batch,
after its transaction committed, with the tables it wrote. `ANALYZE` samples (30,000
rows per table by default), so it costs milliseconds to a second whatever the table
size. SQLite's planner keeps no statistics unless asked; there it does nothing.

Batches run side by side (eight admissions at once is a tested case), and two sessions
analysing one table at the same time can fail ("tuple concurrently updated"). So one
refresh runs at a time per database (a transaction-level advisory lock, *tried*, never
waited for: if another batch is refreshing, its statistics will do), and a refresh that
still fails is logged and dropped: statistics make plans fast, never results right, so
a batch is never failed for them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

import sqlalchemy as sa

log = logging.getLogger(__name__)

ANALYZE_MIN_ROWS = 1_000
"""Rows a batch must have written before its tables are analysed (fewer move no plan)."""
LOCK_KEY = 0x5EF1E5_7A75
"""Advisory-lock key of the statistics refresh (one refresh at a time per database)."""


def refresh_statistics(engine: sa.Engine, tables: Iterable[str], rows: int) -> tuple[str, ...]:
    """`ANALYZE` the tables on PostgreSQL when `rows` is large enough; the tables analysed."""
    names = tuple(dict.fromkeys(tables))
    if engine.dialect.name != "postgresql" or rows < ANALYZE_MIN_ROWS or not names:
        return ()
    quote = engine.dialect.identifier_preparer.quote
    try:
        with engine.begin() as conn:
            mine = conn.execute(sa.text("SELECT pg_try_advisory_xact_lock(:k)"), {"k": LOCK_KEY})
            if not mine.scalar_one():
                return ()
            conn.exec_driver_sql("ANALYZE " + ", ".join(quote(t) for t in names))
    except sa.exc.DBAPIError as exc:
        log.warning("statistics of %s not refreshed: %s", ", ".join(names), exc.orig)
        return ()
    return names
