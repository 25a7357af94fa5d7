from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import polars as pl
import pytest

from reflexmem.maturation import decide_maturity, settle_frame
from reflexmem.prices import dfull_prices
from reflexmem.prices.series import (
    MappingPrices,
    PriceSeries,
    last_at_or_before,
    trailing_signal,
    window_stats,
)

T0 = np.datetime64("2025-01-06T14:30", "us")


def source() -> MappingPrices:
    stamps = T0 + np.arange(40) * np.timedelta64(6, "h")
    up = 100 * np.exp(np.arange(40) * 0.01)
    zigzag = 100 + np.where(np.arange(40) % 2 == 0, 1.0, -1.0)
    return MappingPrices(
        {"UP": PriceSeries(stamps, up, 4.0), "ZZ": PriceSeries(stamps, zigzag, 4.0)}
    )


def test_lookups_never_see_a_bar_after_the_query_instant() -> None:
    src = source()
    at = np.array([T0 - np.timedelta64(1, "h"), T0, T0 + np.timedelta64(5, "h")])
    got = last_at_or_before(src, np.array(["UP", "UP", "UP"]), at)
    assert got.known.tolist() == [False, True, True]
    assert got.index.tolist() == [-1, 0, 0]
    assert np.isnan(got.price[0])
    unknown = last_at_or_before(src, np.array(["NOPE"]), at[:1])
    assert not unknown.known[0]


def test_window_stats_counts_bars_and_scales_volatility_to_days() -> None:
    src = source()
    start = np.array([T0, T0], dtype="datetime64[us]")
    # astype: numpy's stubs type (datetime64 array + timedelta64) as a timedelta64 array
    end = (start + np.timedelta64(10 * 6, "h")).astype("datetime64[us]")
    stats = window_stats(src, np.array(["UP", "ZZ"]), start, end)
    assert stats.bars.tolist() == [10, 10]
    assert stats.daily_vol[0] < 1e-9  # constant log return: no volatility
    assert stats.daily_vol[1] > 0.01


def test_trailing_signal_reads_the_trend_before_the_decision_only() -> None:
    src = source()
    at = np.array([T0 + np.timedelta64(30 * 6, "h")] * 2, dtype="datetime64[us]")
    sig = trailing_signal(src, np.array(["UP", "ZZ"]), at, lookback_bars=4, vol_bars=20)
    assert sig[0] == pytest.approx(1.0)  # a steady rise is the strongest long signal
    assert -1 <= sig[1] <= 1
    earlier = (at[:1] - np.timedelta64(29 * 6, "h")).astype("datetime64[us]")  # as above
    early = trailing_signal(src, np.array(["ZZ"]), earlier, lookback_bars=4, vol_bars=20)
    assert np.isnan(early[0])


def test_settlement_waits_for_the_full_horizon_and_uses_fill_vwap() -> None:
    src = source()
    opened = datetime(2025, 1, 6, 14, 30, tzinfo=UTC)
    positions = pl.DataFrame(
        {
            "position_id": ["p1", "p2", "p3"],
            "decision_id": ["d1", "d2", "d3"],
            "opened_at": [opened, opened, datetime(2025, 1, 15, tzinfo=UTC)],
            "entry_price": [None, 100.0, 100.0],
            "symbol": ["UP", "UP", "UP"],
            "direction": ["long", "short", "long"],
            "role_id": ["fast", "fast", "fast"],
            "qty": [2.0, None, None],
            "notional": [200.0, None, None],
            "fees": [0.0, None, None],
            "first_fill": [opened, None, None],
        }
    )
    out = settle_frame(positions, src, {"fast": 8})  # 8 six-hour bars
    assert out["position_id"].to_list() == ["p1", "p2"]  # p3's horizon is beyond the data
    r1, r2 = out["realized_return"].to_list()
    assert r1 > 0
    assert r2 < 0
    assert abs(r1 + r2) < 1e-12
    assert out["evaluation_points"].to_list() == [8, 8]
    assert settle_frame(positions, src, {}).height == 0  # unknown role: never guessed


def test_maturity_reasons_come_in_policy_order() -> None:
    decided = datetime(2025, 1, 1, tzinfo=UTC)
    cases = pl.DataFrame(
        {
            "role_id": ["r", "r", "r", "r", "ghost"],
            "decided_at": [decided, datetime(2025, 1, 25, tzinfo=UTC), decided, decided, decided],
            "settled": [1, 1, 0, 1, 1],
            "points": [8, 8, 0, 1, 8],
        }
    )
    out = decide_maturity(cases, {"r": 10}, as_of=datetime(2025, 1, 30, tzinfo=UTC), min_points=3)
    assert out["new_reason"].to_list() == [
        None,
        "not_due",
        "unsettled",
        "insufficient_data",
        "not_due",
    ]
    assert out["new_state"].to_list()[0] == "eligible"


def test_dfull_source_has_hourly_tickers_and_daily_spy() -> None:
    src = dfull_prices()
    spy = src.series("SPY")
    aapl = src.series("AAPL")
    assert spy is not None
    assert aapl is not None
    assert spy.bars_per_day == 1.0
    assert aapl.bars_per_day > 1.0
    # The 16:00 New York close of 2025-01-06 is 21:00 UTC.
    assert np.datetime64("2025-01-06T21:00", "us") in spy.timestamps
