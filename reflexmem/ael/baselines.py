"""The four deterministic baselines of the AEL paper, exactly as its protocol states.

Each is a pure function of the visible closes, wrapped in a small frozen allocator.
All fall back to equal weight while the history is shorter than lookback + 1
closes, because the paper's numbers only reproduce with that warm-up rule.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reflexmem.ael.environment import MarketView
from reflexmem.prices.panel import FloatArray


def equal_weights(n_assets: int) -> FloatArray:
    """1/N in every asset."""
    return np.full(n_assets, 1.0 / n_assets, dtype=np.float64)


def momentum_weights(closes: FloatArray, lookback: int = 4, floor: float = 0.02) -> FloatArray:
    """Tilt toward positive lookback momentum, keeping a floor in the losers.

    m_i = C_t / C_t-lookback - 1. With no positive m_i: equal weight. Otherwise each
    non-positive ticker gets `floor` and the positive ones share the rest in
    proportion to m_i. The floor is capped at 0.5 / N so the losers never hold more
    than half the book (the paper's 0.02 for N <= 25; a 0.02 floor on 88 names
    would need negative weights for the winners).
    """
    n = closes.shape[1]
    floor = min(floor, 0.5 / n)
    if closes.shape[0] < lookback + 1:
        return equal_weights(n)
    m = closes[-1] / closes[-1 - lookback] - 1.0
    positive = m > 0
    if not bool(positive.any()):
        return equal_weights(n)
    budget = 1.0 - floor * float(np.count_nonzero(~positive))
    share = np.where(positive, m, 0.0)
    return np.asarray(np.where(positive, budget * share / share.sum(), floor), dtype=np.float64)


def inverse_momentum_weights(closes: FloatArray, lookback: int = 4) -> FloatArray:
    """Contrarian: weight grows with how far a ticker lags the best performer.

    score_i = max_j m_j - m_i + eps, eps = max(0.1 (max m - min m), 1e-6), so even
    the leader keeps a small weight and equal momenta give equal weights.
    """
    n = closes.shape[1]
    if closes.shape[0] < lookback + 1:
        return equal_weights(n)
    m = closes[-1] / closes[-1 - lookback] - 1.0
    top, bottom = float(m.max()), float(m.min())
    score = top - m + max(0.1 * (top - bottom), 1e-6)
    return np.asarray(score / score.sum(), dtype=np.float64)


def min_variance_weights(closes: FloatArray, window: int = 13) -> FloatArray:
    """Inverse-volatility weights from the last `window` closes.

    13 closes give 12 simple returns; sigma_i is their population std (ddof 0).
    If any sigma is zero (a flat price), 1/sigma is undefined and the rule falls
    back to equal weight rather than betting everything on one frozen quote.
    """
    n = closes.shape[1]
    if closes.shape[0] < window:
        return equal_weights(n)
    recent = closes[-window:]
    sigma = np.std(recent[1:] / recent[:-1] - 1.0, axis=0, ddof=0)
    if not bool(np.all(sigma > 0)):
        return equal_weights(n)
    inv = 1.0 / sigma
    return np.asarray(inv / inv.sum(), dtype=np.float64)


@dataclass(frozen=True)
class EqualWeight:
    """EqW baseline."""

    def __call__(self, view: MarketView, /) -> FloatArray:
        """1/N regardless of prices."""
        return equal_weights(view.n_assets)


@dataclass(frozen=True)
class Momentum:
    """Momentum baseline (lookback 4 bars, floor 0.02)."""

    lookback: int = 4
    floor: float = 0.02

    def __call__(self, view: MarketView, /) -> FloatArray:
        """Weights from the visible closes."""
        return momentum_weights(view.tail(self.lookback + 1), self.lookback, self.floor)


@dataclass(frozen=True)
class InverseMomentum:
    """InverseMomentum baseline (lookback 4 bars)."""

    lookback: int = 4

    def __call__(self, view: MarketView, /) -> FloatArray:
        """Weights from the visible closes."""
        return inverse_momentum_weights(view.tail(self.lookback + 1), self.lookback)


@dataclass(frozen=True)
class MinVariance:
    """MinVariance baseline (last 13 closes, inverse population std)."""

    window: int = 13

    def __call__(self, view: MarketView, /) -> FloatArray:
        """Weights from the visible closes."""
        return min_variance_weights(view.tail(self.window), self.window)
