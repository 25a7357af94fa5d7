"""The cycle on a user's own market: symbols and dates D-full does not have.

A decision stream on four made-up symbols, their daily bars (and a daily SPY, the
profile's benchmark) dropped in a folder next to it, goes through the same cycle as
the demo: bars are ingested through the `bars` suite, positions settle and cases
mature against those bars, evaluation runs are written, reflection draws lessons, and
the lessons reach the episodic and semantic tiers. Decisions on a symbol nobody
supplied bars for stay pending `no_market_data`.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import polars as pl
import sqlalchemy as sa

from reflexmem.operations.cycle import CycleParams, run_cycle
from reflexmem.operations.runner import DirectRunner
from reflexmem.prices import LedgerPrices
from reflexmem.prices.panel import PricePanel
from reflexmem.synth import generate, write_stream
from tests.support import make_resources, scalar

SYMBOLS = ("ACME", "BOLT", "CRUX", "DYNE", "SPY")
UNPRICED = "NOBARS"


def _own_market(days: int = 320, seed: int = 4) -> PricePanel:
    rng = np.random.default_rng(seed)
    names = (*SYMBOLS, UNPRICED)
    closes = 50 * np.exp(np.cumsum(rng.normal(0.0003, 0.015, (days, len(names))), axis=0))
    dates = np.busday_offset(np.datetime64("2023-06-01"), np.arange(days), roll="forward")
    # A bare date in a bars file is that day's close at the end of its UTC day.
    # The outer astype: numpy's stubs type (datetime64 array + timedelta64) as timedelta64.
    end_of_day = dates.astype("datetime64[us]") + np.timedelta64(86_400_000_000 - 1, "us")
    stamps = end_of_day.astype("datetime64[us]")
    return PricePanel(stamps, dates, names, closes)


def _drop(folder: Path, panel: PricePanel, n: int) -> None:
    write_stream(generate(panel, n, seed=9), folder)
    priced = [i for i, s in enumerate(panel.tickers) if s != UNPRICED]
    bars = pl.DataFrame(
        {
            "symbol": np.repeat(np.asarray(panel.tickers)[priced], panel.n_bars),
            "ts": np.tile(panel.local_dates.astype(str), len(priced)),
            "close": panel.closes[:, priced].T.ravel(),
        }
    )
    bars.write_csv(folder / "bars-own-market.csv")


def test_a_stream_on_its_own_symbols_and_bars_goes_through_every_tier(
    engine: sa.Engine, tmp_path: Path
) -> None:
    panel = _own_market()
    _drop(tmp_path / "drop", panel, 1500)
    res = replace(make_resources(engine), prices=LedgerPrices(engine))

    report = run_cycle(DirectRunner(res), CycleParams(drop=tmp_path / "drop"))

    assert report.drop is not None
    assert report.drop.rejected == {}
    assert scalar(engine, "SELECT COUNT(DISTINCT symbol) FROM market_bars") == len(SYMBOLS)
    # The clock is the newest of these bars, not the wall clock and not D-full's.
    assert report.maturation.plan.as_of is not None
    assert report.maturation.plan.as_of.date() == panel.local_dates[-1].astype(object)
    assert report.maturation.evaluation.runs > 100
    symbols = {
        r[0]
        for r in engine.connect().execute(
            sa.text(
                "SELECT DISTINCT d.symbol FROM evaluation_runs r "
                "JOIN trading_decisions d ON d.decision_id = r.decision_id"
            )
        )
    }
    assert symbols == set(SYMBOLS)  # every priced symbol, and never the unpriced one
    # No benchmark bar is missing: the excess-return components were measured.
    assert (
        scalar(
            engine,
            "SELECT COUNT(*) FROM evaluation_components "
            "WHERE name = 'excess_vs_benchmark' AND NOT missing",
        )
        > 100
    )
    assert sum(r.reflected for r in report.reflection) == report.maturation.evaluation.runs
    assert sum(r.lessons for r in report.reflection) > 0
    recorded = sum(e.recorded for e in report.memory.episodes)
    assert recorded == report.maturation.evaluation.runs
    assert scalar(engine, "SELECT COUNT(*) FROM episodes WHERE case_id IS NOT NULL") == recorded
    assert (
        scalar(
            engine,
            "SELECT COUNT(*) FROM memory_entries WHERE tier = 'semantic' AND state = 'active'",
        )
        > 0
    )
    # A decision on a symbol without bars waits for prices, and says so.
    unpriced = (
        engine.connect()
        .execute(
            sa.text(
                "SELECT DISTINCT rc.state, rc.pending_reason FROM role_cases rc "
                "WHERE rc.symbol = :s"
            ),
            {"s": UNPRICED},
        )
        .all()
    )
    assert unpriced, "the stream has decisions on the unpriced symbol"
    waits = {"no_market_data", "not_due", "insufficient_data"}
    assert all(state == "pending" and reason in waits for state, reason in unpriced)
    assert ("pending", "no_market_data") in set(unpriced)
