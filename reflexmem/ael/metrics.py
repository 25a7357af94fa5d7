"""The seven Table 2 metrics, vectorised over the last axis (1-D gives 0-d arrays).

Conventions (the AEL protocol, not any library's defaults):

- no risk-free rate; standard deviations are population (ddof 0);
- Sharpe = mean / std * sqrt(T_ann);
- Sortino = mean / std(r[r < 0]) * sqrt(T_ann): the std *of the strictly negative
  returns* (not the downside deviation around 0 that empyrical or quantstats use);
- Return % = (prod(1 + r) - 1) * 100;
- MaxDD % = min over t of V_t / max_{s<=t} V_s - 1, times 100, where V starts at 1
  before the first return (so a loss on the first bar counts);
- Calmar = mean * T_ann / |MaxDD| with MaxDD as a *fraction*, so both sides are in
  the same unit (annualised arithmetic return per unit of drawdown); dividing by
  the percent would just scale every Calmar by 1/100;
- WinR = share of r > 0 (zero returns are not wins);
- TailR = |P95 / P5| with linear-interpolation percentiles.

Degenerate cases follow one rule everywhere: x / 0 is +inf or -inf by the sign of
x, and 0 / 0 is nan. So a constant positive series has Sharpe +inf, a series with
no negative returns has Sortino +inf (the downside std is 0), no drawdown gives
Calmar +inf, and P5 = 0 gives TailR +inf. An empty series has nan ratios, nan
WinR and TailR, and Return % = MaxDD % = 0 (nothing happened).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import numpy.typing as npt

from reflexmem.prices.panel import FloatArray

BARS_PER_YEAR = 1008  # 252 trading days x 4 bars


@dataclass(frozen=True)
class Metrics:
    """One row of Table 2 for one return series."""

    sharpe: float
    sortino: float
    calmar: float
    return_pct: float
    max_dd_pct: float
    win_rate: float
    tail_ratio: float
    n_returns: int

    def as_dict(self) -> dict[str, float | int]:
        """Field name -> value, in Table 2 order."""
        return asdict(self)


def safe_ratio(num: npt.ArrayLike, den: npt.ArrayLike) -> FloatArray:
    """Divide with the module's rule: x/0 -> sign(x) * inf, 0/0 -> nan."""
    n = np.asarray(num, dtype=np.float64)
    d = np.asarray(den, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(d == 0, np.where(n == 0, np.nan, np.copysign(np.inf, n)), n / d)
    return np.asarray(out, dtype=np.float64)


def _arr(returns: npt.ArrayLike) -> FloatArray:
    return np.asarray(returns, dtype=np.float64)


def _mean(r: FloatArray) -> FloatArray:
    if r.shape[-1] == 0:
        return np.full(r.shape[:-1], np.nan)
    return np.asarray(r.mean(axis=-1), dtype=np.float64)


def sharpe(returns: npt.ArrayLike, bars_per_year: float = BARS_PER_YEAR) -> FloatArray:
    """Annualised mean over population std, no risk-free rate."""
    r = _arr(returns)
    std = np.full(r.shape[:-1], np.nan) if r.shape[-1] == 0 else r.std(axis=-1, ddof=0)
    return np.asarray(safe_ratio(_mean(r), std) * np.sqrt(bars_per_year), dtype=np.float64)


def downside_std(returns: npt.ArrayLike) -> FloatArray:
    """Measure the population std of the strictly negative returns (0 if none)."""
    r = _arr(returns)
    neg = r < 0
    count = neg.sum(axis=-1)
    safe = np.maximum(count, 1)
    mean_neg = np.where(neg, r, 0.0).sum(axis=-1) / safe
    dev = np.where(neg, r - mean_neg[..., None], 0.0)
    return np.asarray(np.sqrt((dev * dev).sum(axis=-1) / safe), dtype=np.float64)


def sortino(returns: npt.ArrayLike, bars_per_year: float = BARS_PER_YEAR) -> FloatArray:
    """Annualised mean over the std of the strictly negative returns."""
    r = _arr(returns)
    ratio = safe_ratio(_mean(r), downside_std(r))
    return np.asarray(ratio * np.sqrt(bars_per_year), dtype=np.float64)


def total_return_pct(returns: npt.ArrayLike) -> FloatArray:
    """Compounded return over the series, in percent."""
    r = _arr(returns)
    return np.asarray((np.prod(1.0 + r, axis=-1) - 1.0) * 100.0, dtype=np.float64)


def max_drawdown_pct(returns: npt.ArrayLike) -> FloatArray:
    """Largest peak-to-trough fall of the compounded value, as a percent <= 0."""
    r = _arr(returns)
    value = np.concatenate([np.ones((*r.shape[:-1], 1)), np.cumprod(1.0 + r, axis=-1)], axis=-1)
    peak = np.maximum.accumulate(value, axis=-1)
    return np.asarray((value / peak - 1.0).min(axis=-1) * 100.0, dtype=np.float64)


def calmar(returns: npt.ArrayLike, bars_per_year: float = BARS_PER_YEAR) -> FloatArray:
    """Annualised arithmetic mean over |MaxDD| as a fraction."""
    r = _arr(returns)
    return safe_ratio(_mean(r) * bars_per_year, np.abs(max_drawdown_pct(r)) / 100.0)


def win_rate(returns: npt.ArrayLike) -> FloatArray:
    """Share of strictly positive returns."""
    r = _arr(returns)
    return _mean((r > 0).astype(np.float64))


def tail_ratio(returns: npt.ArrayLike) -> FloatArray:
    """|P95 / P5| with linear interpolation between order statistics."""
    r = _arr(returns)
    if r.shape[-1] == 0:
        return np.full(r.shape[:-1], np.nan)
    p95, p5 = np.percentile(r, [95.0, 5.0], axis=-1, method="linear")
    return safe_ratio(np.abs(p95), np.abs(p5))


def compute_metrics_batch(
    returns: npt.ArrayLike, bars_per_year: float = BARS_PER_YEAR
) -> list[Metrics]:
    """Metrics for each row of a (K, n) array, e.g. one row per cost level."""
    r = _arr(returns)
    if r.ndim == 1:
        r = r.reshape(1, -1)
    columns = (
        sharpe(r, bars_per_year),
        sortino(r, bars_per_year),
        calmar(r, bars_per_year),
        total_return_pct(r),
        max_drawdown_pct(r),
        win_rate(r),
        tail_ratio(r),
    )
    table = np.column_stack(columns)
    n = int(r.shape[-1])
    return [
        Metrics(
            sharpe=float(row[0]),
            sortino=float(row[1]),
            calmar=float(row[2]),
            return_pct=float(row[3]),
            max_dd_pct=float(row[4]),
            win_rate=float(row[5]),
            tail_ratio=float(row[6]),
            n_returns=n,
        )
        for row in table
    ]


def compute_metrics(returns: npt.ArrayLike, bars_per_year: float = BARS_PER_YEAR) -> Metrics:
    """Metrics of one return series."""
    r = np.asarray(returns, dtype=np.float64)
    if r.ndim != 1:
        raise ValueError(f"compute_metrics takes a 1-D series, got shape {r.shape}")
    return compute_metrics_batch(r, bars_per_year)[0]
