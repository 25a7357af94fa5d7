"""Slow-loop reflection: a regime label, an insight and a confidence from one window.

The fast loop (one decision per bar) cannot tell a trend from noise; the slow loop
looks back over the last window of settled episodes and names the regime the book
is in, so the planner can lean with it for the next window. It is deterministic
and reads only what was knowable when it runs: the visible closes (bars 0..t) and
the outcomes of episodes that have already settled. A language model would write
the insight in prose; here the prose is a fixed template over the statistics, so
the same history always yields the same text and the planner never parses it.

Labels and what the planner does with them (`Reflection.planner_regime`):

| label | test (first match wins) | planner regime |
| --- | --- | --- |
| `volatile` | window vol / reference vol >= 1.5 | `risk_off` (more cash) |
| `trending_up` | trend t-stat of the equal-weight index >= 1.5 | `risk_on` (less cash) |
| `trending_down` | trend t-stat <= -1.5 | `risk_off` |
| `mean_reverting` | lag-1 autocorrelation <= -0.25 or momentum IC <= -0.15 | none (fade winners) |
| `range_bound` | otherwise | none |

`momentum_tilt` is the per-ticker lean the insight recommends for the next
window: + (follow 4-bar momentum) when momentum ranked next-bar returns well in
the window, - (fade it) when it ranked them backwards, in [-1, 1].
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from reflexmem.ael.agent import RISK_OFF, RISK_ON
from reflexmem.ael.panel import FloatArray

VOLATILE_RATIO = 1.5
TREND_T = 1.5
REVERSAL_AUTOCORR = -0.25
REVERSAL_IC = -0.15
MOMENTUM_LOOKBACK = 4
REFERENCE_MULTIPLE = 4
LABELS = ("volatile", "trending_up", "trending_down", "mean_reverting", "range_bound")


@dataclass(frozen=True)
class Reflection:
    """What one slow-loop pass concluded, for the episodes until the next pass."""

    label: str
    insight: str
    confidence: float
    planner_regime: str | None
    momentum_tilt: float
    window_start: int
    window_end: int
    stats: dict[str, float]

    def to_dict(self) -> dict[str, object]:
        """Plain JSON-able form (reflection logs, MLflow artifacts)."""
        return {
            "label": self.label,
            "insight": self.insight,
            "confidence": self.confidence,
            "planner_regime": self.planner_regime,
            "momentum_tilt": self.momentum_tilt,
            "window_start": self.window_start,
            "window_end": self.window_end,
            "stats": dict(self.stats),
        }


def _corr(a: FloatArray, b: FloatArray) -> float:
    ca, cb = a - a.mean(), b - b.mean()
    denom = float(np.sqrt((ca * ca).sum() * (cb * cb).sum()))
    return float((ca * cb).sum() / denom) if denom > 0 else 0.0


def _ranks(x: FloatArray) -> FloatArray:
    order = np.argsort(x, kind="stable")
    ranks = np.empty(x.shape[0], dtype=np.float64)
    ranks[order] = np.arange(x.shape[0], dtype=np.float64)
    return ranks


def momentum_ic(closes: FloatArray, window: int, lookback: int = MOMENTUM_LOOKBACK) -> float:
    """Mean rank correlation of `lookback`-bar momentum with the next bar's return.

    Only bars k whose next close k+1 is visible count, so this is point in time:
    at the last visible bar t the newest pair is (momentum at t-1, return t-1 -> t).
    """
    t = closes.shape[0] - 1
    first = max(lookback, t - window)
    values = [
        _corr(
            _ranks(closes[k] / closes[k - lookback] - 1.0),
            _ranks(closes[k + 1] / closes[k] - 1.0),
        )
        for k in range(first, t)
    ]
    return float(np.mean(values)) if values else 0.0


def reflect(
    closes: FloatArray,
    outcomes: Sequence[float],
    *,
    window: int = 10,
    episode_end: int | None = None,
) -> Reflection:
    """Reflect on the last `window` bars of `closes` and the settled `outcomes`.

    `closes` are bars 0..t (a `MarketView`'s closes); `outcomes` are the episode
    outcomes s in [-1, 1] of the window just closed (any length; the hit rate is
    the share of positive ones, 0.5 when there are none). Confidence is the
    strength of the statistic behind the label (in [0, 1]) times
    (0.5 + 0.5 * hit rate): a regime read made while the agent was losing money
    is trusted less. `episode_end` only labels the window in the insight.
    """
    if window < 2:
        raise ValueError(f"window must be >= 2, got {window}")
    c = np.asarray(closes, dtype=np.float64)
    index = c.mean(axis=1) / c[0].mean() if c.shape[0] else np.ones(1)
    rets = index[1:] / index[:-1] - 1.0
    recent = rets[-window:]
    reference = rets[-window * REFERENCE_MULTIPLE :]
    n = int(recent.shape[0])
    mean = float(recent.mean()) if n else 0.0
    sd = float(recent.std(ddof=0)) if n else 0.0
    ref_sd = float(reference.std(ddof=0)) if reference.shape[0] else 0.0
    trend_t = mean / sd * np.sqrt(n) if sd > 0 else 0.0
    vol_ratio = sd / ref_sd if ref_sd > 0 and reference.shape[0] > n else 1.0
    autocorr = _corr(recent[1:], recent[:-1]) if n >= 4 else 0.0
    ic = momentum_ic(c, window)
    s = np.asarray(list(outcomes), dtype=np.float64)
    hit = float((s > 0).mean()) if s.size else 0.5
    mean_outcome = float(s.mean()) if s.size else 0.0

    if vol_ratio >= VOLATILE_RATIO:
        label, strength = "volatile", min(1.0, (vol_ratio - 1.0) / 1.0)
        regime, advice = RISK_OFF, "hold more cash until volatility settles"
    elif trend_t >= TREND_T:
        label, strength = "trending_up", min(1.0, trend_t / 3.0)
        regime, advice = RISK_ON, "stay invested and lean into the trend"
    elif trend_t <= -TREND_T:
        label, strength = "trending_down", min(1.0, -trend_t / 3.0)
        regime, advice = RISK_OFF, "cut exposure while the index falls"
    elif autocorr <= REVERSAL_AUTOCORR or ic <= REVERSAL_IC:
        label = "mean_reverting"
        strength = min(1.0, max(-autocorr / 0.5, -ic / 0.3))
        regime, advice = None, "fade recent winners"
    else:
        label, strength = "range_bound", min(1.0, abs(ic) / 0.3)
        regime, advice = None, "no strong read; follow the tools"
    confidence = float(np.clip(strength * (0.5 + 0.5 * hit), 0.0, 1.0))
    tilt = float(np.clip(ic / 0.3, -1.0, 1.0))
    if label == "mean_reverting":
        tilt = min(tilt, -0.5 * strength)
    end = episode_end if episode_end is not None else c.shape[0] - 1
    stats = {
        "index_return": float(np.prod(1.0 + recent) - 1.0) if n else 0.0,
        "trend_t": float(trend_t),
        "vol_ratio": float(vol_ratio),
        "autocorr": float(autocorr),
        "momentum_ic": float(ic),
        "hit_rate": hit,
        "mean_outcome": mean_outcome,
        "n_bars": float(n),
    }
    insight = (
        f"{label} over episodes {end - len(s)}-{end}: index {stats['index_return']:+.2%}"
        f" (t={trend_t:+.2f}), vol ratio {vol_ratio:.2f}, autocorr {autocorr:+.2f},"
        f" momentum IC {ic:+.2f}; own hit rate {hit:.0%}, mean outcome {mean_outcome:+.2f}"
        f" -> {advice}"
    )
    return Reflection(label, insight, confidence, regime, tilt, end - len(s), end, stats)
