from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import polars as pl
import pytest

from reflexmem.maturation import decide_maturity, settle_frame
from reflexmem.maturation.mature import valid_from
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


def test_a_matured_outcome_is_valid_from_its_due_time_or_its_settlement_if_later() -> None:
    utc = UTC
    cases = pl.DataFrame(
        {
            "role_id": ["r", "r", "r"],
            "decided_at": [datetime(2025, 1, 1, tzinfo=utc)] * 3,
            "settled_at": [
                datetime(2025, 1, 4, tzinfo=utc),  # settled before it was due
                datetime(2025, 1, 15, tzinfo=utc),  # settled after
                None,  # not settled: not mature, no valid time
            ],
            "settled": [1, 1, 0],
            "points": [8, 8, 0],
        }
    ).with_columns(pl.col("settled_at").cast(pl.Datetime("us", "UTC")))
    days = {"r": 10}
    for clock in (datetime(2025, 1, 20, tzinfo=utc), datetime(2025, 6, 1, tzinfo=utc)):
        out = decide_maturity(cases, days, as_of=clock, min_points=3)
        stamped = out.select(valid_from(days))[:, 0].to_list()
        # The stamp is a property of the data, not of the clock the check ran at.
        assert stamped == [
            datetime(2025, 1, 11, tzinfo=utc),
            datetime(2025, 1, 15, tzinfo=utc),
            None,
        ]
    # Just before its stamp the first case is not mature yet; at its stamp, it is.
    states = [
        decide_maturity(cases[:1], days, as_of=datetime(2025, 1, d, 23, tzinfo=utc), min_points=3)
        for d in (10, 11)
    ]
    assert [f["new_state"][0] for f in states] == ["pending", "eligible"]


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


# Daily closes (16:00 New York = 21:00 UTC) from Tue 2024-08-20 to Fri 2024-09-13 with
# Labor Day (Mon 2024-09-02) missing: a Friday decision faces a three-day weekend.
HOLIDAY = np.datetime64("2024-09-02")
DAYS = np.array(
    [
        d
        for d in np.arange(np.datetime64("2024-08-20"), np.datetime64("2024-09-14"))
        if np.is_busday(d) and d != HOLIDAY
    ]
)
DAILY = (DAYS.astype("datetime64[us]") + np.timedelta64(21, "h")).astype("datetime64[us]")


def daily_source(last: np.datetime64 | None = None) -> MappingPrices:
    stamps = DAILY if last is None else DAILY[last >= DAILY]
    closes = 100 + np.arange(stamps.size, dtype=np.float64)
    return MappingPrices({"HOLI": PriceSeries(stamps, closes, 1.0)})


def _friday_position(opened: datetime) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "position_id": ["p1"],
            "decision_id": ["d1"],
            "opened_at": [opened],
            "entry_price": [100.0],
            "symbol": ["HOLI"],
            "direction": ["long"],
            "role_id": ["momentum"],
            "qty": [None],
            "notional": [None],
            "fees": [None],
            "first_fill": [None],
        },
        schema_overrides={"qty": pl.Float64, "notional": pl.Float64, "fees": pl.Float64},
    )


def test_a_position_before_a_long_weekend_settles_on_its_nth_bar() -> None:
    # Opened Friday 2024-08-30 at 15:00 New York: the entry bar is that Friday's close.
    opened = datetime(2024, 8, 30, 19, 0, tzinfo=UTC)
    out = settle_frame(_friday_position(opened), daily_source(), {"momentum": 5})
    assert out["position_id"].to_list() == ["p1"]
    # Five bars after Friday: Tue 3, Wed 4, Thu 5, Fri 6, Mon 9 (Monday 2 is a holiday).
    assert out["settled_at"].to_list() == [datetime(2024, 9, 9, 21, 0, tzinfo=UTC)]
    assert out["evaluation_points"].to_list() == [5]
    entry_bar = int(np.flatnonzero(np.datetime64("2024-08-30") == DAYS)[0])
    assert out["exit_price"].to_list() == [100.0 + entry_bar + 5]
    # The case is measured on five bars, enough for the default minimum of three.
    case = pl.DataFrame(
        {
            "role_id": ["momentum"],
            "decided_at": [opened],
            "settled": [1],
            "points": out["evaluation_points"].to_list(),
        }
    )
    when = datetime(2024, 9, 13, 22, tzinfo=UTC)
    assert decide_maturity(case, {"momentum": 5}, as_of=when, min_points=3)[
        "new_state"
    ].to_list() == ["eligible"]


def test_a_position_opened_after_the_close_enters_at_the_next_bar() -> None:
    # Opened Friday after the close: the entry bar is Tuesday's, the exit five bars later.
    opened = datetime(2024, 8, 30, 22, 0, tzinfo=UTC)
    out = settle_frame(_friday_position(opened), daily_source(), {"momentum": 5})
    assert out["settled_at"].to_list() == [datetime(2024, 9, 10, 21, 0, tzinfo=UTC)]
    assert out["evaluation_points"].to_list() == [5]


def test_a_position_whose_nth_bar_is_not_known_stays_open() -> None:
    opened = datetime(2024, 8, 30, 19, 0, tzinfo=UTC)
    # The series ends at the fourth bar after entry (Fri 2024-09-06): not settled early.
    short = daily_source(np.datetime64("2024-09-06T21:00", "us"))
    assert settle_frame(_friday_position(opened), short, {"momentum": 5}).height == 0
    # Nor when the fifth bar exists but lies after `as_of`.
    capped = settle_frame(
        _friday_position(opened),
        daily_source(),
        {"momentum": 5},
        as_of=datetime(2024, 9, 9, 20, 59, tzinfo=UTC),
    )
    assert capped.height == 0


def test_stale_needs_twice_the_horizon_in_bars_of_the_symbol() -> None:
    from reflexmem.maturation.stale import stale_mask

    cases = pl.DataFrame(
        {
            "case_id": ["old", "fresh", "ghost_role", "no_bars"],
            "role_id": ["momentum", "momentum", "ghost", "momentum"],
            "symbol": ["HOLI", "HOLI", "HOLI", "NOPE"],
            "decided_at": [datetime(2024, 8, 20, 19, tzinfo=UTC)] * 4,
        }
    ).with_columns(
        pl.when(pl.col("case_id") == "fresh")
        .then(pl.lit(datetime(2024, 8, 30, 19, tzinfo=UTC)))
        .otherwise(pl.col("decided_at"))
        .alias("decided_at")
    )
    now = datetime(2024, 9, 13, 22, tzinfo=UTC)
    # Entry Tue 2024-08-20; ten bars later is Wed 2024-09-04 (the holiday not counted).
    # The fresh case entered Fri 2024-08-30: its tenth bar (Mon 2024-09-16) is not in.
    got = stale_mask(cases, daily_source(), {"momentum": 5}, now)
    assert got.tolist() == [True, False, False, False]
    # A clock before the tenth bar's close: not stale yet.
    early = datetime(2024, 9, 4, 20, 59, tzinfo=UTC)
    assert not stale_mask(cases, daily_source(), {"momentum": 5}, early).any()
    # Ten bars exactly: stale at the tenth close.
    at_tenth = datetime(2024, 9, 4, 21, 0, tzinfo=UTC)
    assert stale_mask(cases, daily_source(), {"momentum": 5}, at_tenth).tolist()[0]
