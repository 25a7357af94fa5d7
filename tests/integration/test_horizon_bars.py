"""An outcome horizon counts bars of the decision's symbol, on both backends.

Every decision of a clean stream is moved to one symbol whose daily bars miss the two
business days after the first decision (a long weekend): its position settles on the
N-th bar after its entry bar (N = the role's horizon in bars), is measured on N points
and the case becomes eligible, where a calendar horizon would have seen too few bars
and kept it pending for ever. The doctor's stale pending count then needs twice the
horizon in bars: a case whose bars have not arrived is waiting, not stale.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import polars as pl
import sqlalchemy as sa

from reflexmem.ledger.health import health_counts
from reflexmem.maturation.stale import stale_judge
from reflexmem.operations import intake, maturation
from reflexmem.prices import LedgerPrices
from reflexmem.synth import write_stream
from tests.integration.ledger_data import clean_stream
from tests.support import make_resources

SYMBOL = "HOLI"
ROLE = "momentum"  # horizon 5 bars, maturation 5 days (reflexmem/skills)
N = 5


def _open_stream(n: int) -> dict[str, pl.DataFrame]:
    s = clean_stream(n)
    one = {"symbol": pl.lit(SYMBOL)}
    return {
        "decisions": s["decisions"].with_columns(pl.lit(ROLE).alias("role_id"), **one),
        "previews": s["previews"].with_columns(**one),
        "executions": s["executions"].with_columns(**one),
        "fills": s["fills"],
        "outcomes": s["outcomes"].with_columns(
            pl.lit("open").alias("status"),
            pl.lit(None, dtype=pl.Datetime("us", "UTC")).alias("settled_at"),
            pl.lit(None, dtype=pl.Float64).alias("exit_price"),
            pl.lit(None, dtype=pl.Float64).alias("realized_return"),
            pl.lit(0).alias("evaluation_points"),
        ),
    }


def _bars(first: np.datetime64, last: np.datetime64, skip: set[np.datetime64]) -> pl.DataFrame:
    days = [d for d in np.arange(first, last + 1) if np.is_busday(d) and d not in skip]
    return pl.DataFrame(
        {
            "symbol": [SYMBOL] * len(days),
            "ts": [str(d) for d in days],  # a bare date closes at the end of its UTC day
            "close": 100.0 + np.arange(len(days), dtype=np.float64),
        }
    )


def test_a_decision_before_a_long_weekend_settles_on_n_bars_and_matures(
    engine: sa.Engine, tmp_path: Path
) -> None:
    stream = _open_stream(8)
    decided = stream["decisions"].sort("decided_at")["decided_at"]
    first_day = np.datetime64(decided[0].date())
    target = stream["decisions"].sort("decided_at")["decision_id"][0]
    # The two business days after the first decision are missing: a holiday weekend.
    gap = set(np.busday_offset(first_day, [1, 2], roll="forward").tolist())
    gap = {np.datetime64(d) for d in gap}
    last = np.datetime64(decided[-1].date()) + np.timedelta64(40, "D")
    bars = _bars(np.busday_offset(first_day, -20, roll="forward"), last, gap)
    bars_path = tmp_path / "bars-holi.csv"
    bars.write_csv(bars_path)

    res = make_resources(engine)
    intake.ingest(res, write_stream(stream, tmp_path / "in"))
    intake.ingest(res, [bars_path], "bars")
    res = replace(res, prices=LedgerPrices(engine))
    admitted = intake.admit(res)
    assert admitted.pending == 8  # open positions: pending unsettled

    as_of = maturation.plan(res).as_of
    assert as_of is not None
    assert maturation.settle(res, as_of).settled == 8
    report = maturation.mature(res, as_of)
    assert report.matured == 8, report.pending

    with engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT d.decision_id, p.evaluation_points, p.settled_at, p.exit_price, "
                "rc.state FROM position_lifecycles p "
                "JOIN trading_decisions d ON d.decision_id = p.decision_id "
                "JOIN role_cases rc ON rc.decision_id = d.decision_id"
            )
        ).fetchall()
    assert {r[1] for r in rows} == {N}
    assert {r[4] for r in rows} == {"eligible"}
    # The target entered at its decision day's close and exits five bars later, the
    # two missing days not counted.
    entry = bars.with_row_index().filter(pl.col("ts") == str(first_day))["index"][0]
    exit_day = bars["ts"][entry + N]
    got = next(r for r in rows if r[0] == target)
    assert str(got[2])[:10] == exit_day
    assert float(got[3]) == 100.0 + entry + N
    # A calendar horizon of five days would have held fewer than three bars.
    window_end = first_day + np.timedelta64(N, "D")
    calendar_points = sum(first_day < np.datetime64(d) <= window_end for d in bars["ts"])
    assert calendar_points < 3


def test_stale_pending_counts_twice_the_horizon_in_bars_only(
    engine: sa.Engine, tmp_path: Path
) -> None:
    stream = _open_stream(8)
    decided = stream["decisions"].sort("decided_at")["decided_at"]
    first_day = np.datetime64(decided[0].date())
    res = make_resources(engine)
    intake.ingest(res, write_stream(stream, tmp_path / "in"))
    intake.admit(res)
    far = datetime(2100, 1, 1, tzinfo=UTC)  # long past twice every maturation period
    days = {r: res.registry.get(r).policy.maturation.days for r in res.registry.ids}
    horizons = {r: res.registry.get(r).policy.outcome_probe.horizon_bars for r in res.registry.ids}

    def stale(prices: LedgerPrices) -> int:
        with engine.connect() as conn:
            return health_counts(conn, days, far, stale_judge(prices, horizons, far)).stale_pending

    # No bars yet: every case is waiting for its bars, none is stale.
    assert stale(LedgerPrices(engine)) == 0
    # Bars up to the first decision's 2N-th bar after entry: that case alone is stale
    # (its pending position should have settled by now); the others wait for bars.
    start = np.busday_offset(first_day, -3, roll="forward")
    bars = _bars(start, np.busday_offset(first_day, 30, roll="forward"), set())
    entry = bars.with_row_index().filter(pl.col("ts") == str(first_day))["index"][0]
    cut = bars.head(entry + 2 * N + 1)
    dates = [np.datetime64(d.date()) for d in decided]
    last_bar = np.datetime64(cut["ts"][-1])
    cut_days = np.array([np.datetime64(d) for d in cut["ts"]])
    entries = [int(np.searchsorted(cut_days, d)) for d in dates]  # same-day close or later
    expected = sum(
        e + 2 * N <= cut.height - 1 and d <= last_bar for e, d in zip(entries, dates, strict=True)
    )
    path = tmp_path / "bars.csv"
    cut.write_csv(path)
    intake.ingest(res, [path], "bars")
    assert stale(LedgerPrices(engine)) == expected
    assert 0 < expected < 8  # the others are fresh: their bars have not arrived
