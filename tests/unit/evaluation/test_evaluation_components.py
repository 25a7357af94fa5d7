from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import polars as pl
import pytest

from reflexmem.evaluation import COMPONENTS, compute_components, get_profile, long_components
from reflexmem.evaluation.profiles import BenchmarkProfile
from reflexmem.prices.series import MappingPrices, PriceSeries

T0 = np.datetime64("2025-01-01T00:00", "us")


def prices(bench_days: int = 60) -> MappingPrices:
    rng = np.random.default_rng(1)
    hourly = T0 + np.arange(400) * np.timedelta64(6, "h")
    daily = T0 + np.arange(bench_days) * np.timedelta64(1, "D")
    return MappingPrices(
        {
            "X": PriceSeries(hourly, 100 * np.exp(np.cumsum(rng.normal(0, 0.01, 400))), 4.0),
            "SPY": PriceSeries(
                daily, 400 * np.exp(np.cumsum(rng.normal(0, 0.01, bench_days))), 1.0
            ),
        }
    )


def cases(opened: datetime, days: int = 5, direction: str = "long") -> pl.DataFrame:
    return pl.DataFrame(
        {
            "decision_id": ["d1"],
            "case_id": ["c1"],
            "role_id": ["momentum"],
            "symbol": ["X"],
            "direction": [direction],
            "decided_at": [opened],
            "opened_at": [opened],
            "settled_at": [opened + timedelta(days=days)],
            "entry_price": [100.0],
            "exit_price": [103.0],
            "realized_return": [0.03 if direction == "long" else -0.03],
        }
    )


def test_every_component_has_value_flag_and_quality() -> None:
    out = compute_components(cases(datetime(2025, 1, 30, tzinfo=UTC)), prices(), get_profile())
    for name in COMPONENTS:
        assert {name, f"{name}_missing", f"{name}_quality"} <= set(out.columns)
    row = out.row(0, named=True)
    assert row["raw_return"] == pytest.approx(0.03)
    assert row["direction_hit"] == 1.0
    bench = row["benchmark_return"]
    assert row["excess_vs_benchmark"] == pytest.approx(0.03 - bench)
    assert row["risk_adjusted"] == pytest.approx(0.03 / (row["realized_vol"] * np.sqrt(5)))
    assert all(row[f"{n}_quality"] == "ok" for n in COMPONENTS)
    assert long_components(out.with_columns(pl.lit("r1").alias("run_id"))).height == len(COMPONENTS)


def test_a_short_position_measures_excess_in_its_own_direction() -> None:
    out = compute_components(
        cases(datetime(2025, 1, 30, tzinfo=UTC), direction="short"), prices(), get_profile()
    )
    row = out.row(0, named=True)
    assert row["excess_vs_benchmark"] == pytest.approx(-(0.03 - row["benchmark_return"]))
    assert row["direction_hit"] == 0.0


def test_a_missing_benchmark_is_flagged_never_filled_in() -> None:
    # The benchmark ends 20 days before the settlement: stale, hence missing.
    out = compute_components(
        cases(datetime(2025, 2, 10, tzinfo=UTC)), prices(bench_days=30), get_profile()
    )
    row = out.row(0, named=True)
    assert row["benchmark_return"] is None
    assert row["benchmark_return_missing"]
    assert row["excess_vs_benchmark_quality"] == "benchmark_stale"
    assert row["raw_return_quality"] == "ok"  # other factors keep their own verdicts


def test_profiles_are_versioned() -> None:
    assert get_profile().version == 1
    assert get_profile(version=2).signal_lookback_bars != get_profile().signal_lookback_bars
    with pytest.raises(KeyError):
        get_profile("nope")
    with pytest.raises(ValueError, match="invalid"):
        BenchmarkProfile("x'y", 1)
