"""Decision streams with nothing to learn, or one planted effect, on real daily bars.

`bench learning` asks whether the production memory learns what is true and only that.
It needs streams whose truth is known:

* **null**: each decision is settled on the prices of *another* decision's symbol and
  date (a random permutation), so no outcome can depend on anything the agent knew;
  whatever the memory confirms is a false discovery.
* **planted**: one condition, drawn at random per seed among the kinds the episodes
  carry (a required evidence kind missing, going against the role's signal, a symbol,
  a scenario), truly costs its carriers ``effect_sd`` standard deviations of the
  role's realized returns. The cost is written into the user data, as a worse fill
  price, never into the learner.

A stream is the frame `reflexmem.memory.role_stream.select_unrecorded` would read from a
ledger (one row per reflected case), so the production `episode_frame` turns it into
episodes: the same outcome score, quality and condition tags the cycle computes. Each
row also carries what the benchmark alone may read: `realized_return` and whether the
planted condition was on it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import polars as pl

from reflexmem.memory.role_stream import MIN_SIGNAL
from reflexmem.prices.dfull_bars import dfull_bar_frames
from reflexmem.registry import RequiredEvidence, Role

SCENARIOS = ("breakout", "mean_reversion", "earnings", "rotation")
LOOKBACK = 20
"""Bars of the trailing signal (and of the volatility that scales it)."""
FOLLOW_SIGNAL = 0.7
EVIDENCE_PRESENT = 0.75


@dataclass(frozen=True)
class Bars:
    """Daily closes of several symbols on one clock (bars x symbols)."""

    ts: np.ndarray
    symbols: tuple[str, ...]
    closes: np.ndarray

    def __post_init__(self) -> None:
        if self.closes.shape != (len(self.ts), len(self.symbols)):
            raise ValueError("closes must be bars x symbols")
        if len(self.symbols) < 2:
            raise ValueError("a stream needs at least two symbols")
        if not np.all(np.isfinite(self.closes)) or np.any(self.closes <= 0):
            raise ValueError("closes must be finite and positive on every bar")


@dataclass(frozen=True)
class Stream:
    """One generated stream: the case rows and what was planted (None for a null stream)."""

    cases: pl.DataFrame
    planted: str | None
    cost: float
    conditions: tuple[str, ...] = ()
    """Every condition the generator could have planted on these bars and role."""


def daily_bars(frame: pl.DataFrame) -> Bars:
    """Daily closes from long bars (`symbol`, `ts`, `close`): last close per UTC date.

    A symbol without a bar on some date carries its last close forward; dates before
    every symbol has started are cut.
    """
    daily = (
        frame.with_columns(pl.col("ts").dt.date().alias("day"))
        .sort("symbol", "ts")
        .group_by("symbol", "day", maintain_order=True)
        .agg(pl.col("ts").last(), pl.col("close").last())
    )
    wide = (
        daily.pivot(on="symbol", index="day", values="close")
        .sort("day")
        .fill_null(strategy="forward")
        .drop_nulls()
    )
    symbols = tuple(c for c in wide.columns if c != "day")
    stamps = wide["day"].cast(pl.Datetime("us")).dt.replace_time_zone("UTC").to_numpy()
    return Bars(stamps, symbols, wide.select(symbols).to_numpy().astype(float))


def dfull_daily(root: Path | None = None) -> Bars:
    """The bundled D-full daily closes (`prices_daily/*.csv`), on their common dates."""
    return daily_bars(dfull_bar_frames(root, daily=True))


def file_bars(path: Path) -> Bars:
    """Daily closes from a long bars file (CSV or Parquet with `symbol`, `ts`, `close`)."""
    frame = pl.read_parquet(path) if path.suffix == ".parquet" else pl.read_csv(path)
    missing = {"symbol", "ts", "close"} - set(frame.columns)
    if missing:
        raise ValueError(f"{path}: a bars file needs symbol, ts, close (lacks {sorted(missing)})")
    ts = frame["ts"]
    if ts.dtype == pl.String:
        ts = ts.str.to_datetime(time_zone="UTC", time_unit="us")
    elif isinstance(ts.dtype, pl.Datetime) and ts.dtype.time_zone is None:
        ts = ts.dt.replace_time_zone("UTC")
    return daily_bars(frame.with_columns(ts.alias("ts"), pl.col("close").cast(pl.Float64)))


def stretched(bars: Bars, length: int, *, seed: int = 0, mean_block: int = 20) -> Bars:
    """The bars made `length` bars long by a stationary bootstrap of whole days' returns.

    What a role can learn is bounded by calendar time, not by decisions (docs/learning.md):
    this shows what more of it would find. Days are drawn in blocks of geometric length
    (mean `mean_block`, wrapping around) with every symbol's return of the same day, so
    each symbol's volatility and the symbols' co-movement are kept; trends longer than a
    block are not. Dates are business days from the first bar.
    """
    if length < 2:
        raise ValueError(f"a stretched panel needs at least 2 bars, got {length}")
    steps = np.diff(np.log(bars.closes), axis=0)
    rng = np.random.default_rng(seed)
    jumps = rng.random(length - 1) < 1.0 / mean_block
    jumps[0] = True
    position = np.arange(length - 1)
    first = np.maximum.accumulate(np.where(jumps, position, 0))
    starts = rng.integers(0, steps.shape[0], length - 1)
    days = (starts[first] + position - first) % steps.shape[0]
    logs = np.vstack([np.zeros((1, steps.shape[1])), np.cumsum(steps[days], axis=0)])
    origin = bars.ts[0].astype("datetime64[D]")
    ts = np.busday_offset(origin, np.arange(length), roll="forward").astype("datetime64[us]")
    return Bars(ts, bars.symbols, bars.closes[0] * np.exp(logs))


def _conditions(role: Role, symbols: tuple[str, ...]) -> list[str]:
    kinds = [f"missing:{e.kind}" for e in role.policy.required_evidence]
    symbol = [f"symbol:{s}" for s in symbols]
    return [*kinds, "against:signal", *symbol, *(f"scenario:{s}" for s in SCENARIOS)]


def generate(
    bars: Bars,
    role: Role,
    *,
    n: int,
    seed: int,
    kind: str,
    effect_sd: float = 0.0,
    horizon: int = 10,
) -> Stream:
    """A stream of ``n`` decisions of ``role``: ``kind`` is "null" or "planted"."""
    if kind not in ("null", "planted"):
        raise ValueError(f"kind must be null or planted, got {kind!r}")
    t_count, a_count = bars.closes.shape
    if t_count < LOOKBACK + horizon + 2:
        raise ValueError(f"{t_count} bars: need at least {LOOKBACK + horizon + 2}")
    rng = np.random.default_rng(seed)
    sym = rng.integers(0, a_count, n)
    bar = np.sort(rng.integers(LOOKBACK, t_count - horizon, n))
    logc = np.log(bars.closes)
    steps = np.diff(logc, axis=0)
    trail = logc[bar, sym] - logc[bar - LOOKBACK, sym]
    sums = _prefix_sums(steps)
    sd = _window_sd(sums, bar - LOOKBACK, bar, sym)
    signal = np.tanh(trail / (np.maximum(sd, 1e-9) * np.sqrt(LOOKBACK)))
    follow = rng.random(n) < FOLLOW_SIGNAL
    side = np.where(follow == (signal >= 0), 1.0, -1.0)
    scenario = np.array(SCENARIOS)[rng.integers(0, len(SCENARIOS), n)]
    kinds = list(role.policy.required_evidence)
    present = rng.random((n, len(kinds))) < EVIDENCE_PRESENT
    # Settle on one's own prices, or (null) take another decision's whole realized
    # return: its symbol, its dates and its direction, so nothing of this one remains.
    settle = np.arange(n) if kind == "planted" else rng.permutation(n)
    s_sym, s_bar = sym[settle], bar[settle]
    move = bars.closes[s_bar + horizon, s_sym] / bars.closes[s_bar, s_sym] - 1.0
    path_sd = _window_sd(sums, s_bar, s_bar + horizon, s_sym)
    raw = side[settle] * move
    planted, cost, carries = None, 0.0, np.zeros(n, dtype=bool)
    if kind == "planted":
        candidates = _conditions(role, bars.symbols)
        planted = candidates[rng.integers(len(candidates))]
        cost = effect_sd * float(raw.std(ddof=1))
        carries = _carriers(planted, kinds, present, side, signal, bars.symbols, sym, scenario)
        fill = 1.0 + side * np.where(carries, cost, 0.0)  # a worse fill for the carriers
        raw = side * ((1.0 + move) / fill - 1.0)
    decided = bars.ts[bar].astype("datetime64[us]")
    span = bars.ts[s_bar + horizon].astype("datetime64[us]") - bars.ts[s_bar].astype(
        "datetime64[us]"
    )
    settled = decided + span
    days = (settled - decided) / np.timedelta64(1, "D")
    vol = path_sd * np.sqrt(horizon / np.maximum(days, 1.0))
    evidence = [
        json.dumps(
            [
                {"kind": k.kind, "as_of": _iso(decided[i])}
                for j, k in enumerate(kinds)
                if present[i, j]
            ]
        )
        for i in range(n)
    ]
    ids = [f"{kind}-{seed}-{i:06d}" for i in range(n)]
    cases = pl.DataFrame(
        {
            "case_id": ids,
            "decision_id": ids,
            "role_id": role.id,
            "symbol": np.array(bars.symbols)[sym],
            "scenario": scenario,
            "outcome_class": pl.Series([None] * n, dtype=pl.String),
            "lesson": pl.Series([None] * n, dtype=pl.String),
            "direction": np.where(side > 0, "long", "short"),
            "decided_at": pl.Series(decided).dt.replace_time_zone("UTC"),
            "evidence": evidence,
            "opened_at": pl.Series(decided).dt.replace_time_zone("UTC"),
            "settled_at": pl.Series(settled).dt.replace_time_zone("UTC"),
            "policy": pl.Series([None] * n, dtype=pl.String),
            "raw_return": raw,
            "excess": raw,
            "risk_adjusted": raw / np.maximum(path_sd * np.sqrt(horizon), 1e-9),
            "hit": (raw > 0).astype(float),
            "vol": vol,
            "signal": signal,
            "measured": 4,
            "realized_return": raw,
            "planted": carries,
        }
    )
    return Stream(cases, planted, cost, tuple(_conditions(role, bars.symbols)))


def _prefix_sums(steps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Cumulative sums of the steps and their squares per symbol, with a leading zero row."""
    zero = np.zeros((1, steps.shape[1]))
    return (
        np.concatenate([zero, np.cumsum(steps, axis=0)]),
        np.concatenate([zero, np.cumsum(steps * steps, axis=0)]),
    )


def _window_sd(
    sums: tuple[np.ndarray, np.ndarray], lo: np.ndarray, hi: np.ndarray, sym: np.ndarray
) -> np.ndarray:
    """Sample standard deviation (ddof 1) of `steps[lo:hi, sym]` per decision, vectorized."""
    total = sums[0][hi, sym] - sums[0][lo, sym]
    squares = sums[1][hi, sym] - sums[1][lo, sym]
    m = (hi - lo).astype(float)
    variance = np.maximum(squares - total * total / m, 0.0) / (m - 1.0)
    return np.asarray(np.sqrt(variance), dtype=float)


def _iso(stamp: np.datetime64) -> str:
    return datetime.fromtimestamp(stamp.astype("datetime64[us]").astype(int) / 1e6, UTC).isoformat()


def _carriers(
    planted: str,
    kinds: list[RequiredEvidence],
    present: np.ndarray,
    side: np.ndarray,
    signal: np.ndarray,
    symbols: tuple[str, ...],
    sym: np.ndarray,
    scenario: np.ndarray,
) -> np.ndarray:
    """Which decisions carry the planted condition, as `episode_frame` will tag them."""
    what, _, value = planted.partition(":")
    if what == "missing":
        return ~present[:, [k.kind for k in kinds].index(value)]
    if what == "against":
        found = (np.abs(signal) >= MIN_SIGNAL) & (signal * side < 0)
    elif what == "symbol":
        found = np.array(symbols)[sym] == value
    else:
        found = scenario == value
    return np.asarray(found, dtype=bool)
