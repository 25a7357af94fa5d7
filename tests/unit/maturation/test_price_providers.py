from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from reflexmem.prices.panel import default_dfull_root
from reflexmem.prices.providers import PanelPrices, PriceProvider
from reflexmem.prices.series import (
    MappingPrices,
    PriceSeries,
    Unsettled,
    dfull_prices,
    unsettled_reasons,
)

T0 = np.datetime64("2025-01-06T14:30", "us")
H = np.timedelta64(1, "h")


def gappy() -> MappingPrices:
    """Bars at T0 .. T0+9h, then nothing for 20 h, then T0+30h .. T0+39h."""
    stamps = np.concatenate([T0 + np.arange(10) * H, T0 + (30 + np.arange(10)) * H])
    return MappingPrices({"GAP": PriceSeries(stamps, np.linspace(10, 20, 20), 10.0)})


def test_unsettled_reasons_tell_missing_data_from_waiting() -> None:
    src = gappy()
    cases = [
        ("NONE", 0, 5, Unsettled.NO_MARKET_DATA),  # the symbol has no bar at all
        ("GAP", 12, 20, Unsettled.NO_MARKET_DATA),  # series went past target: a hole
        ("GAP", 12, 30, Unsettled.AWAITING_PRICES),  # a bar at target: settleable
        ("GAP", 35, 45, Unsettled.AWAITING_PRICES),  # the series ends before target
        ("GAP", 39, 39, Unsettled.NO_MARKET_DATA),  # no bar after opening, reached target
        ("GAP", 2, 8, Unsettled.AWAITING_PRICES),  # bars in the window
    ]
    symbols = np.array([c[0] for c in cases])
    opened = np.array([T0 + c[1] * H for c in cases], dtype="datetime64[us]")
    target = np.array([T0 + c[2] * H for c in cases], dtype="datetime64[us]")
    got = unsettled_reasons(src, symbols, opened, target)
    assert got.tolist() == [c[3].value for c in cases]


def test_unsettled_reasons_is_vectorized_over_a_large_batch() -> None:
    src = gappy()
    rng = np.random.default_rng(0)
    n = 200_000
    opened = T0 + rng.integers(0, 40, n) * H
    target = opened + rng.integers(0, 15, n) * H
    symbols = np.where(rng.random(n) < 0.1, "NONE", "GAP")
    got = unsettled_reasons(src, symbols, opened, target)
    gap_series = src.series("GAP")
    assert gap_series is not None
    ts = gap_series.timestamps
    in_window = np.searchsorted(ts, target, "right") > np.searchsorted(ts, opened, "right")
    gap = (symbols == "NONE") | ((target <= ts[-1]) & ~in_window)
    assert (got == Unsettled.NO_MARKET_DATA.value).tolist() == gap.tolist()


def test_mapping_prices_is_a_provider() -> None:
    src = gappy()
    provider: PriceProvider = src
    assert provider.for_symbols(["GAP", "NOPE"]).series("GAP") is src.series("GAP")
    assert provider.for_symbols(["NOPE"]).series("GAP") is None
    assert provider.newest() == datetime(2025, 1, 8, 5, 30, tzinfo=UTC)
    assert MappingPrices({}).newest() is None


def test_panel_prices_over_the_dfull_folder_equal_dfull_prices() -> None:
    reference = dfull_prices()
    provider = PanelPrices(default_dfull_root())
    got = provider.for_symbols(reference.symbols)
    assert provider.symbols == reference.symbols
    for symbol in reference.symbols:
        a, b = reference.series(symbol), got.series(symbol)
        assert a is not None
        assert b is not None
        np.testing.assert_array_equal(a.timestamps, b.timestamps)
        np.testing.assert_array_equal(a.closes, b.closes)
    assert provider.newest() == reference.newest()


def test_a_panel_of_bare_dates_closes_at_the_end_of_each_utc_day(tmp_path: Path) -> None:
    wide = tmp_path / "panel.csv"
    pl.DataFrame(
        {"date": ["2025-01-06", "2025-01-07"], "AAA": [1.0, 2.0], "BBB": [3.0, 4.0]}
    ).write_csv(wide)
    long = tmp_path / "long.parquet"
    pl.DataFrame(
        {
            "timestamp": [datetime(2025, 1, 6, 15, 0, tzinfo=UTC)] * 2,
            "symbol": ["AAA", "BBB"],
            "close": [1.0, 3.0],
        }
    ).write_parquet(long)
    daily = PanelPrices(wide).for_symbols(["AAA", "BBB"])
    aaa = daily.series("AAA")
    assert aaa is not None
    assert aaa.timestamps.tolist() == [
        datetime(2025, 1, 6, 23, 59, 59, 999999),
        datetime(2025, 1, 7, 23, 59, 59, 999999),
    ]
    intraday = PanelPrices(long)
    bbb = intraday.for_symbols(["BBB"]).series("BBB")
    assert bbb is not None
    assert bbb.timestamps.tolist() == [datetime(2025, 1, 6, 15)]
    assert intraday.newest() == datetime(2025, 1, 6, 15, tzinfo=UTC)


def test_a_single_daily_file_is_one_symbol_closing_at_16_new_york(tmp_path: Path) -> None:
    path = tmp_path / "SPY.csv"
    pl.DataFrame({"Date": ["2025-01-06", "2025-07-07"], "Close": [590.0, 620.0]}).write_csv(path)
    spy = PanelPrices(path).for_symbols(["SPY"]).series("SPY")
    assert spy is not None
    # 16:00 New York is 21:00 UTC in winter and 20:00 UTC in summer
    assert spy.timestamps.tolist() == [datetime(2025, 1, 6, 21), datetime(2025, 7, 7, 20)]


def test_an_empty_folder_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no prices_1h"):
        PanelPrices(tmp_path).newest()
