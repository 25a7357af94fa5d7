"""Compute every evaluation component of a batch of settled cases, vectorized.

Each factor gets its own value, `missing` flag and quality label, and nothing combines
them into a score: a reviewer must be able to see that a run's risk-adjusted return is
missing because the window had too few bars while its raw return is fine, and a single
number would hide exactly that.

Returns follow the position's own window `[opened_at, settled_at]`:

* `raw_return`: the settled position's realized return (signed by direction, net of fees),
* `benchmark_return`: the benchmark's simple return over the same window, from the last
  closes at or before each end; missing when a close is older than the profile allows,
* `excess_vs_benchmark`: `sign * (asset_return - benchmark_return)`, the position's
  edge over simply holding the benchmark in the same direction (the same quantity the
  rule classifier judges an excess-return probe on),
* `realized_vol`: daily volatility of the instrument's bar returns inside the window,
* `risk_adjusted`: `raw_return / (realized_vol * sqrt(window_days))`,
* `direction_hit`: 1 when the position made money, else 0,
* `benchmark_shock_sigma`: the benchmark move in units of its trailing daily volatility
  scaled to the window,
* `signal_at_decision`: the instrument's lookback move in units of its own noise,
  from bars at or before the decision only.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import polars as pl

from reflexmem.evaluation.profiles import COMPONENTS, BenchmarkProfile
from reflexmem.prices.series import (
    PriceSource,
    last_at_or_before,
    trailing_signal,
    window_stats,
)

OK = "ok"
_US_PER_DAY = 86_400_000_000


def _times(frame: pl.DataFrame, col: str) -> npt.NDArray[np.datetime64]:
    return (frame[col].dt.replace_time_zone(None).cast(pl.Datetime("us")).to_numpy()).astype(
        "datetime64[us]"
    )


def _flag(
    missing: npt.NDArray[np.bool_], labels: list[tuple[npt.NDArray[np.bool_], str]]
) -> list[str]:
    """Quality label per row: the first matching label of a missing row, else `ok`."""
    out = np.where(missing, "missing", OK).astype(object)
    for cond, label in reversed(labels):
        out[cond & missing] = label
    return [str(x) for x in out]


def compute_components(
    cases: pl.DataFrame, source: PriceSource, profile: BenchmarkProfile
) -> pl.DataFrame:
    """One row per case: `<name>`, `<name>_missing`, `<name>_quality` for every component."""
    n = cases.height
    sign = np.where(cases["direction"].to_numpy() == "long", 1.0, -1.0)
    symbols = cases["symbol"].to_numpy().astype(str)
    opened = _times(cases, "opened_at")
    settled = _times(cases, "settled_at")
    decided = _times(cases, "decided_at")
    raw = cases["realized_return"].cast(pl.Float64).fill_null(np.nan).to_numpy()
    entry = cases["entry_price"].cast(pl.Float64).fill_null(np.nan).to_numpy()
    exit_ = cases["exit_price"].cast(pl.Float64).fill_null(np.nan).to_numpy()
    with np.errstate(invalid="ignore", divide="ignore"):
        asset = np.where(
            np.isfinite(entry) & np.isfinite(exit_) & (entry > 0), exit_ / entry - 1, sign * raw
        )
    span_us = (settled - opened).astype("timedelta64[us]").astype(np.float64)
    days = np.maximum(span_us / _US_PER_DAY, 1.0 / 24.0)
    no_settlement = np.isnan(raw) | np.isnat(settled) | np.isnat(opened)

    bench_sym = np.full(n, profile.benchmark)
    b0 = last_at_or_before(source, bench_sym, opened)
    b1 = last_at_or_before(source, bench_sym, settled)
    stale_limit = np.timedelta64(int(profile.max_staleness_days * _US_PER_DAY), "us")
    stale = ((opened - b0.stamp) > stale_limit) | ((settled - b1.stamp) > stale_limit)
    bench_absent = ~(b0.known & b1.known)
    with np.errstate(invalid="ignore", divide="ignore"):
        bench = b1.price / b0.price - 1
    bench_missing = bench_absent | stale | no_settlement | ~np.isfinite(bench)
    bench = np.where(bench_missing, np.nan, bench)

    excess = sign * (asset - bench)
    excess_missing = bench_missing | ~np.isfinite(excess)

    win = window_stats(source, symbols, opened, settled)
    vol = win.daily_vol
    vol_missing = ~np.isfinite(vol) | no_settlement
    with np.errstate(invalid="ignore", divide="ignore"):
        risk = raw / (vol * np.sqrt(days))
    zero_vol = ~vol_missing & (vol <= 0)
    risk_missing = vol_missing | zero_vol | ~np.isfinite(risk)

    hit = np.where(raw > 0, 1.0, 0.0)

    lookback = np.timedelta64(profile.benchmark_vol_days, "D").astype("timedelta64[us]")
    bvol = window_stats(source, bench_sym, opened - lookback, opened).daily_vol
    with np.errstate(invalid="ignore", divide="ignore"):
        shock = bench / (bvol * np.sqrt(days))
    shock_missing = bench_missing | ~np.isfinite(shock)

    signal = trailing_signal(
        source,
        symbols,
        decided,
        lookback_bars=profile.signal_lookback_bars,
        vol_bars=profile.signal_vol_bars,
    )
    signal_missing = ~np.isfinite(signal)

    values: dict[str, tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_], list[str]]] = {
        "raw_return": (raw, no_settlement, _flag(no_settlement, [(no_settlement, "unsettled")])),
        "excess_vs_benchmark": (
            excess,
            excess_missing,
            _flag(
                excess_missing,
                [
                    (no_settlement, "unsettled"),
                    (bench_absent, "benchmark_unavailable"),
                    (stale, "benchmark_stale"),
                ],
            ),
        ),
        "risk_adjusted": (
            risk,
            risk_missing,
            _flag(
                risk_missing,
                [
                    (no_settlement, "unsettled"),
                    (vol_missing, "insufficient_bars"),
                    (zero_vol, "zero_volatility"),
                ],
            ),
        ),
        "direction_hit": (hit, no_settlement, _flag(no_settlement, [(no_settlement, "unsettled")])),
        "benchmark_return": (
            bench,
            bench_missing,
            _flag(
                bench_missing,
                [
                    (no_settlement, "unsettled"),
                    (bench_absent, "benchmark_unavailable"),
                    (stale, "benchmark_stale"),
                ],
            ),
        ),
        "realized_vol": (
            vol,
            vol_missing,
            _flag(vol_missing, [(no_settlement, "unsettled"), (vol_missing, "insufficient_bars")]),
        ),
        "benchmark_shock_sigma": (
            shock,
            shock_missing,
            _flag(
                shock_missing,
                [(bench_missing, "benchmark_unavailable"), (shock_missing, "insufficient_bars")],
            ),
        ),
        "signal_at_decision": (
            signal,
            signal_missing,
            _flag(signal_missing, [(signal_missing, "no_history")]),
        ),
    }
    assert tuple(values) == COMPONENTS
    cols: dict[str, pl.Series] = {}
    for name, (value, missing, quality) in values.items():
        cols[name] = pl.Series(name, np.where(missing, np.nan, value)).fill_nan(None)
        cols[f"{name}_missing"] = pl.Series(f"{name}_missing", missing, dtype=pl.Boolean)
        cols[f"{name}_quality"] = pl.Series(f"{name}_quality", quality, dtype=pl.String)
    return cases.hstack(list(cols.values()))


def long_components(runs: pl.DataFrame) -> pl.DataFrame:
    """The `evaluation_components` rows (run_id, name, value, missing, quality) of a batch."""
    parts = [
        runs.select(
            "run_id",
            pl.lit(name).alias("name"),
            pl.col(name).cast(pl.Float64).alias("value"),
            pl.col(f"{name}_missing").alias("missing"),
            pl.col(f"{name}_quality").alias("quality"),
        )
        for name in COMPONENTS
    ]
    return pl.concat(parts) if parts else pl.DataFrame()
