"""Market regime at bar t from closes 0..t: trend x volatility of the equal-weight index.

The learning agent conditions what it remembers about the rules on this label, so a
rule that pays in calm rising markets and loses in volatile falling ones can be
preferred in one and avoided in the other. Both statistics are computed from the
equal-weight index's bar returns e_j = mean_i (C_j+1,i / C_j,i - 1) for j < t, so the
label at t never reads a close after t:

- trend: up if the sum of the last `TREND_BARS` index returns is >= 0, else down;
- volatility: wild if the std of the last `TREND_BARS` returns exceeds the std of the
  last `VOL_REFERENCE_BARS`, else calm.

Until `TREND_BARS` returns are visible the label is `unknown`. The windows (20 and
100 bars) are fixed a priori, not tuned.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from reflexmem.prices.panel import FloatArray

TREND_BARS = 20
VOL_REFERENCE_BARS = 100
REGIMES = ("unknown", "up_calm", "up_wild", "down_calm", "down_wild")
TAIL = VOL_REFERENCE_BARS + 1
"""Closes a view must supply for the label (older closes cannot change it)."""


def _label(trend: FloatArray, short_sd: FloatArray, long_sd: FloatArray) -> npt.NDArray[np.int64]:
    up = trend >= 0
    wild = short_sd > long_sd
    code = np.where(up, np.where(wild, 2, 1), np.where(wild, 4, 3))
    return np.asarray(code, dtype=np.int64)


def regime_codes(closes: FloatArray) -> npt.NDArray[np.int64]:
    """Regime index (into `REGIMES`) of every bar of a close matrix, vectorised."""
    c = np.asarray(closes, dtype=np.float64)
    t_bars = c.shape[0]
    out = np.zeros(t_bars, dtype=np.int64)
    if t_bars <= TREND_BARS:
        return out
    e = (c[1:] / c[:-1] - 1.0).mean(axis=1)  # e[j]: index return j -> j+1
    s1 = np.concatenate([[0.0], np.cumsum(e)])
    s2 = np.concatenate([[0.0], np.cumsum(e * e)])
    t = np.arange(TREND_BARS, t_bars)  # bars with TREND_BARS returns visible: e[t-20..t-1]
    short_n = TREND_BARS
    trend = s1[t] - s1[t - short_n]
    short_mean = trend / short_n
    short_sd = np.sqrt(np.maximum((s2[t] - s2[t - short_n]) / short_n - short_mean**2, 0.0))
    start = np.maximum(t - VOL_REFERENCE_BARS, 0)
    long_n = t - start
    long_mean = (s1[t] - s1[start]) / long_n
    long_sd = np.sqrt(np.maximum((s2[t] - s2[start]) / long_n - long_mean**2, 0.0))
    out[TREND_BARS:] = _label(trend, short_sd, long_sd)
    return out


def regime_at(tail: FloatArray) -> int:
    """Regime index at the last bar of `tail` (at least `TAIL` closes, or all there are)."""
    return int(regime_codes(np.asarray(tail, dtype=np.float64)[-TAIL:])[-1])
