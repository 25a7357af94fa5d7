"""Where settlement and evaluation get market prices: a small protocol and a D-full source.

Settlement, maturity and evaluation only ever ask "the last close at or before t",
"the bars inside (start, end]" and "the n-th bar after the entry bar" (an outcome
horizon counts bars, not calendar days) for many positions at once. The protocol therefore hands
out whole per-symbol series and every query here is a `searchsorted` over one symbol's
sorted clock at a time: a batch of a million positions on ten symbols costs ten
vectorized lookups, not a million.

A close is known only once its bar has ended, so every lookup is "at or before"; a
query never sees a price stamped after the instant it asks about. Where the series come
from (the ledger's `market_bars`, a panel file) is `reflexmem.prices.providers`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Protocol

import numpy as np
import numpy.typing as npt
import polars as pl

from reflexmem.prices.panel import PricePanel, default_dfull_root, load_dfull

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
TimeArray = npt.NDArray[np.datetime64]

DAILY_CLOSE_LOCAL = "16:00:00"
"""US equity closes are stamped at the 16:00 New York close, converted to UTC."""


@dataclass(frozen=True, eq=False)
class PriceSeries:
    """One symbol's closes on its own strictly increasing UTC clock (microseconds)."""

    timestamps: TimeArray
    closes: FloatArray
    bars_per_day: float

    def __post_init__(self) -> None:
        ts = np.asarray(self.timestamps, dtype="datetime64[us]")
        closes = np.asarray(self.closes, dtype=np.float64)
        if ts.shape != closes.shape or ts.ndim != 1:
            raise ValueError("a price series needs one close per timestamp")
        if ts.size > 1 and not bool(np.all(ts[1:] > ts[:-1])):
            raise ValueError("price timestamps must be strictly increasing")
        if self.bars_per_day <= 0:
            raise ValueError("bars_per_day must be positive")
        object.__setattr__(self, "timestamps", ts)
        object.__setattr__(self, "closes", closes)

    @property
    def last(self) -> np.datetime64:
        """The newest bar's timestamp: nothing after it is known."""
        last: np.datetime64 = self.timestamps[-1]
        return last


class PriceSource(Protocol):
    """Anything that can hand out a symbol's close series (or None if it has none)."""

    def series(self, symbol: str) -> PriceSeries | None:
        """The full series of `symbol`; `None` when the source does not carry it."""
        ...


def bars_per_day(ts: TimeArray) -> float:
    """Bars per calendar day that has any bar (at least 1): scales bar volatility to daily."""
    if ts.size == 0:
        return 1.0
    days = np.unique(ts.astype("datetime64[D]")).size
    return max(ts.size / max(days, 1), 1.0)


def series_from_panel(panel: PricePanel) -> dict[str, PriceSeries]:
    """Split a price panel into per-symbol series on the panel's clock."""
    bpd = bars_per_day(panel.timestamps)
    return {
        t: PriceSeries(panel.timestamps, panel.closes[:, j], bpd)
        for j, t in enumerate(panel.tickers)
    }


def daily_close_stamp(date: pl.Expr) -> pl.Expr:
    """A `YYYY-MM-DD` date as the UTC instant of that day's 16:00 New York close (naive)."""
    return (
        (date.cast(pl.String) + " " + DAILY_CLOSE_LOCAL)
        .str.to_datetime("%Y-%m-%d %H:%M:%S", time_unit="us")
        .dt.replace_time_zone("America/New_York")
        .dt.convert_time_zone("UTC")
        .dt.replace_time_zone(None)
    )


def read_daily_csv(path: Path) -> PriceSeries:
    """A `Date,Close,...` daily file, each close stamped at 16:00 New York in UTC."""
    frame = pl.read_csv(path, columns=["Date", "Close"], try_parse_dates=False)
    stamps = daily_close_stamp(pl.col("Date"))
    clean = frame.select(stamps.alias("ts"), pl.col("Close").cast(pl.Float64)).drop_nulls()
    clean = clean.sort("ts").unique("ts", keep="last", maintain_order=True)
    return PriceSeries(
        clean["ts"].to_numpy().astype("datetime64[us]"), clean["Close"].to_numpy(), 1.0
    )


def as_utc(stamp: np.datetime64) -> datetime:
    """A naive-UTC numpy stamp as an aware `datetime`."""
    naive: datetime = stamp.astype("datetime64[us]").item()
    return naive.replace(tzinfo=UTC)


class MappingPrices:
    """A `PriceSource` over an in-memory mapping of symbol to series (also a provider)."""

    def __init__(self, series: dict[str, PriceSeries]) -> None:
        self._series = dict(series)

    def series(self, symbol: str) -> PriceSeries | None:
        """The stored series of `symbol`, if any."""
        return self._series.get(symbol)

    @property
    def symbols(self) -> tuple[str, ...]:
        """Every symbol the source carries, sorted."""
        return tuple(sorted(self._series))

    def for_symbols(self, symbols: Iterable[str]) -> MappingPrices:
        """The series of `symbols` this source carries (others are simply absent)."""
        wanted = set(symbols)
        return MappingPrices({s: v for s, v in self._series.items() if s in wanted})

    def newest(self) -> datetime | None:
        """The newest bar stamp over all symbols (aware UTC), None when there is none."""
        ends = [s.last for s in self._series.values() if s.timestamps.size]
        return as_utc(max(ends)) if ends else None


def dfull_prices(root: Path | None = None) -> MappingPrices:
    """The vendored D-full prices: hourly bars per ticker plus daily SPY (the benchmark).

    The hourly panel is what decisions were made on; the daily files add symbols the
    panel does not carry (SPY), never replacing an hourly series with a coarser one.
    """
    base = default_dfull_root() if root is None else root
    series = series_from_panel(load_dfull(base))
    for path in sorted((base / "prices_daily").glob("*.csv")):
        if path.stem not in series:
            series[path.stem] = read_daily_csv(path)
    return MappingPrices(series)


def _group_indices(symbols: npt.NDArray[np.str_]) -> list[tuple[str, IntArray]]:
    uniq, inverse = np.unique(symbols, return_inverse=True)
    order = np.argsort(inverse, kind="stable")
    bounds = np.searchsorted(inverse[order], np.arange(uniq.size + 1))
    return [(str(u), order[bounds[i] : bounds[i + 1]]) for i, u in enumerate(uniq)]


@dataclass(frozen=True)
class Lookup:
    """Per query: the index of the last bar at or before `at` in its symbol's series."""

    index: IntArray
    price: FloatArray
    stamp: TimeArray
    known: npt.NDArray[np.bool_]


def last_at_or_before(source: PriceSource, symbols: npt.NDArray[np.str_], at: TimeArray) -> Lookup:
    """Vectorized "last close at or before t"; unknown symbol or no earlier bar -> NaN."""
    n = symbols.size
    index = np.full(n, -1, dtype=np.int64)
    price = np.full(n, np.nan)
    stamp = np.full(n, np.datetime64("NaT"), dtype="datetime64[us]")
    at_us = np.asarray(at, dtype="datetime64[us]")
    for symbol, rows in _group_indices(symbols):
        s = source.series(symbol)
        if s is None or s.timestamps.size == 0:
            continue
        q = at_us[rows]
        i = np.searchsorted(s.timestamps, q, side="right") - 1
        ok = (i >= 0) & ~np.isnat(q)
        safe = np.where(ok, i, 0)
        index[rows] = np.where(ok, i, -1)
        price[rows] = np.where(ok, s.closes[safe], np.nan)
        stamp[rows] = np.where(ok, s.timestamps[safe], np.datetime64("NaT"))
    return Lookup(index, price, stamp, index >= 0)


@dataclass(frozen=True)
class Horizon:
    """Per query: its entry bar and the bar a horizon of `n` bars after it.

    `entry` is the first bar at or after the start (a decision between bars enters at
    the next close); `exit` is the `n`-th bar after `entry` on the same symbol's clock,
    unknown (index -1, NaN, NaT) while the series does not reach that far. Counting bars
    instead of calendar time makes a weekend or a holiday cost nothing: the horizon is
    always `n` bars of the symbol's own series, daily or intraday as ingested.
    """

    entry: Lookup
    exit: Lookup


def _unknown(n: int) -> tuple[IntArray, FloatArray, TimeArray]:
    return (
        np.full(n, -1, dtype=np.int64),
        np.full(n, np.nan),
        np.full(n, np.datetime64("NaT"), dtype="datetime64[us]"),
    )


def bars_after(
    source: PriceSource, symbols: npt.NDArray[np.str_], start: TimeArray, n: IntArray
) -> Horizon:
    """Vectorized "the `n`-th bar after the first bar at or after `start`" (see `Horizon`).

    One `searchsorted` per symbol whatever the batch size; a NaT `start`, a negative `n`
    or an unknown symbol leaves both lookups unknown.
    """
    size = symbols.size
    e_idx, e_px, e_ts = _unknown(size)
    x_idx, x_px, x_ts = _unknown(size)
    s_us = np.asarray(start, dtype="datetime64[us]")
    steps = np.asarray(n, dtype=np.int64)
    for symbol, rows in _group_indices(symbols):
        s = source.series(symbol)
        if s is None or s.timestamps.size == 0:
            continue
        q = s_us[rows]
        i = np.searchsorted(s.timestamps, q, side="left")
        has_entry = (i < s.timestamps.size) & ~np.isnat(q)
        j = i + steps[rows]
        has_exit = has_entry & (steps[rows] >= 0) & (j < s.timestamps.size)
        si = np.where(has_entry, i, 0)
        sj = np.where(has_exit, j, 0)
        e_idx[rows] = np.where(has_entry, i, -1)
        e_px[rows] = np.where(has_entry, s.closes[si], np.nan)
        e_ts[rows] = np.where(has_entry, s.timestamps[si], np.datetime64("NaT"))
        x_idx[rows] = np.where(has_exit, j, -1)
        x_px[rows] = np.where(has_exit, s.closes[sj], np.nan)
        x_ts[rows] = np.where(has_exit, s.timestamps[sj], np.datetime64("NaT"))
    return Horizon(Lookup(e_idx, e_px, e_ts, e_idx >= 0), Lookup(x_idx, x_px, x_ts, x_idx >= 0))


def series_end(source: PriceSource, symbols: npt.NDArray[np.str_]) -> TimeArray:
    """Per query, the newest bar of its symbol (NaT when the symbol is unknown)."""
    out = np.full(symbols.size, np.datetime64("NaT"), dtype="datetime64[us]")
    for symbol, rows in _group_indices(symbols):
        s = source.series(symbol)
        if s is not None and s.timestamps.size:
            out[rows] = s.last
    return out


@dataclass(frozen=True)
class WindowStats:
    """Bar returns inside a window: how many, and their daily-scaled volatility."""

    bars: IntArray
    daily_vol: FloatArray


def window_stats(
    source: PriceSource, symbols: npt.NDArray[np.str_], start: TimeArray, end: TimeArray
) -> WindowStats:
    """Bar count and daily volatility of log returns of bars in (start, end] per query.

    Cumulative sums of returns and squared returns make each window O(1), so a batch
    costs two `searchsorted` calls per symbol whatever the window lengths.
    """
    n = symbols.size
    bars = np.zeros(n, dtype=np.int64)
    vol = np.full(n, np.nan)
    s_us = np.asarray(start, dtype="datetime64[us]")
    e_us = np.asarray(end, dtype="datetime64[us]")
    for symbol, rows in _group_indices(symbols):
        s = source.series(symbol)
        if s is None or s.timestamps.size < 2:
            continue
        r = np.diff(np.log(s.closes))
        c1 = np.concatenate(([0.0], np.cumsum(r)))
        c2 = np.concatenate(([0.0], np.cumsum(r * r)))
        lo = np.searchsorted(s.timestamps, s_us[rows], side="right")
        hi = np.searchsorted(s.timestamps, e_us[rows], side="right")
        lo = np.where(np.isnat(s_us[rows]), hi, lo)
        count = np.maximum(hi - lo, 0)
        bars[rows] = count
        # Returns strictly inside the window: bar k's return is closes[k] / closes[k-1].
        a = np.clip(lo, 1, r.size + 1) - 1
        b = np.clip(hi, 1, r.size + 1) - 1
        m = np.maximum(b - a, 0)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = (c1[b] - c1[a]) / m
            var = (c2[b] - c2[a] - m * mean * mean) / (m - 1)
            v = np.sqrt(np.maximum(var, 0.0)) * np.sqrt(s.bars_per_day)
        vol[rows] = np.where(m >= 2, v, np.nan)
    return WindowStats(bars, vol)


def trailing_signal(
    source: PriceSource,
    symbols: npt.NDArray[np.str_],
    at: TimeArray,
    *,
    lookback_bars: int,
    vol_bars: int,
) -> FloatArray:
    """What the tape said at `at`: the lookback log return in units of its own noise.

    `clip(r_lookback / (sigma_bar * sqrt(lookback)), -1, 1)` with `sigma_bar` the
    standard deviation of the `vol_bars` bar returns before `at`. Only bars at or before
    `at` enter, so the signal is what a role could have read when it decided. NaN when
    the history is too short.
    """
    out = np.full(symbols.size, np.nan)
    at_us = np.asarray(at, dtype="datetime64[us]")
    need = max(lookback_bars, vol_bars)
    for symbol, rows in _group_indices(symbols):
        s = source.series(symbol)
        if s is None or s.timestamps.size <= need:
            continue
        logp = np.log(s.closes)
        r = np.diff(logp)
        c1 = np.concatenate(([0.0], np.cumsum(r)))
        c2 = np.concatenate(([0.0], np.cumsum(r * r)))
        i = np.searchsorted(s.timestamps, at_us[rows], side="right") - 1
        ok = i >= need
        j = np.where(ok, i, need)
        move = logp[j] - logp[j - lookback_bars]
        a, b = j - vol_bars, j
        mean = (c1[b] - c1[a]) / vol_bars
        var = (c2[b] - c2[a] - vol_bars * mean * mean) / max(vol_bars - 1, 1)
        sigma = np.sqrt(np.maximum(var, 0.0)) * np.sqrt(lookback_bars)
        with np.errstate(invalid="ignore", divide="ignore"):
            sig = np.clip(move / sigma, -1.0, 1.0)
        out[rows] = np.where(ok & (sigma > 0), sig, np.nan)
    return out


class Unsettled(StrEnum):
    """Why a position cannot settle yet."""

    NO_MARKET_DATA = "no_market_data"
    """No bar of the symbol at all, or a gap: the series passed the target with no bar
    after the position opened. Waiting will not help; prices must be supplied."""
    AWAITING_PRICES = "awaiting_prices"
    """The series has not reached the target yet; the next bars may settle it."""


def unsettled_reasons(
    source: PriceSource, symbols: npt.NDArray[np.str_], opened: TimeArray, target: TimeArray
) -> npt.NDArray[np.str_]:
    """Per position, `no_market_data` or `awaiting_prices` (see `Unsettled`).

    `no_market_data` when the source has no bar of the symbol, or its newest bar is at
    or after `target` while no bar lies in (`opened`, `target`]; `awaiting_prices`
    otherwise (the series simply ends before `target`, or `target` is NaT). A NaT
    `opened` bounds nothing: any bar at or before `target` counts. Meant for positions that did not
    settle: a settleable one (a bar in the window and the series past `target`) reads
    `awaiting_prices`. Two `searchsorted` calls per symbol, whatever the batch size.
    """
    n = symbols.size
    out = np.full(n, Unsettled.NO_MARKET_DATA.value, dtype=object)
    o_us = np.asarray(opened, dtype="datetime64[us]")
    t_us = np.asarray(target, dtype="datetime64[us]")
    for symbol, rows in _group_indices(symbols):
        s = source.series(symbol)
        if s is None or s.timestamps.size == 0:
            continue
        lo = np.searchsorted(s.timestamps, o_us[rows], side="right")
        lo = np.where(np.isnat(o_us[rows]), 0, lo)
        hi = np.searchsorted(s.timestamps, t_us[rows], side="right")
        gap = (s.last >= t_us[rows]) & (hi <= lo)
        out[rows] = np.where(gap, Unsettled.NO_MARKET_DATA.value, Unsettled.AWAITING_PRICES.value)
    return out.astype(str)
