"""After a bulk load the planner knows what was loaded: ANALYZE runs on what a batch wrote."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from adapters.db import make_engine
from reflexmem.ledger.statistics import ANALYZE_MIN_ROWS, refresh_statistics
from tests.support import make_resources, seed_ledger

TABLES = ("trading_decisions", "trade_executions", "role_cases")


def _manual_analyses(engine: sa.Engine) -> dict[str, int]:
    """Manual ANALYZE runs per table so far (autovacuum's are counted apart)."""
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT relname, analyze_count FROM pg_stat_user_tables WHERE relname = ANY(:t)"
            ),
            {"t": list(TABLES)},
        ).all()
    return {str(r[0]): int(r[1]) for r in rows}


@pytest.mark.postgres
def test_ingest_and_admission_analyse_the_tables_they_loaded(pg_url: str, tmp_path: Path) -> None:
    engine = make_engine(pg_url)
    with engine.begin() as conn:
        conn.exec_driver_sql("TRUNCATE trading_decisions RESTART IDENTITY CASCADE")
    before = _manual_analyses(engine)
    seed_ledger(make_resources(engine), tmp_path, n=3000)  # > ANALYZE_MIN_ROWS executions
    after = _manual_analyses(engine)
    for _ in range(50):  # the statistics view lags its backends by up to about a second
        if all(after.get(t, 0) > before.get(t, 0) for t in TABLES):
            break
        time.sleep(0.1)
        after = _manual_analyses(engine)
    assert all(after.get(t, 0) > before.get(t, 0) for t in TABLES), (before, after)
    with engine.connect() as conn:
        estimate = conn.execute(
            sa.text("SELECT reltuples FROM pg_class WHERE relname = 'trading_decisions'")
        ).scalar_one()
    assert estimate >= 1000  # the planner's row estimate is the loaded table's, not zero
    # A small record through the agent path does not pay for an ANALYZE.
    assert refresh_statistics(engine, ["trading_decisions"], ANALYZE_MIN_ROWS - 1) == ()
    engine.dispose()


def test_sqlite_keeps_no_statistics_so_nothing_runs(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    assert refresh_statistics(engine, ["trading_decisions"], 10**6) == ()
    engine.dispose()
