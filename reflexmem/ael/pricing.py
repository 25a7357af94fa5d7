"""Price a weight path over a fold's splits with the project's one cost rule.

Fixed rules (from a `RuleBook`) and the online-portfolio peers (weights computed in
their own environment) hand over a weight for every decision bar of a fold; this
turns it into the same `Episode`s the environment produces for an allocator, so every
row of the table is measured one way: one continuous run over the fold, no buy-in at
its first decision, each split's first return paying the turnover from the weight
decided at the previous split's last bar (README of the D-full data).
"""

from __future__ import annotations

import numpy as np

from reflexmem.ael.environment import Episode, portfolio_returns
from reflexmem.ael.splits import ChronoSplits
from reflexmem.prices.panel import FloatArray, PricePanel

_TOL = 1e-6


def fold_span(splits: ChronoSplits) -> tuple[int, int]:
    """First bar and stop of the fold the splits cover (they are consecutive)."""
    return splits.train.start, splits.test.stop


def check_weights(weights: FloatArray, where: str) -> FloatArray:
    """Long-only, finite, summing to at most 1 (tiny negatives from solvers clipped)."""
    w = np.asarray(weights, dtype=np.float64)
    if not np.all(np.isfinite(w)):
        row = int(np.flatnonzero(~np.isfinite(w).all(axis=1))[0])
        raise ValueError(f"{where}: non-finite weights at decision row {row}")
    if np.any(w < -_TOL) or np.any(w.sum(axis=1) > 1.0 + _TOL):
        row = int(np.flatnonzero((w < -_TOL).any(axis=1) | (w.sum(axis=1) > 1 + _TOL))[0])
        raise ValueError(
            f"{where}: weights must be long-only and sum to <= 1 (row {row}: sum"
            f" {float(w[row].sum()):.6f}, min {float(w[row].min()):.6f})"
        )
    return np.asarray(np.clip(w, 0.0, None), dtype=np.float64)


def price_path(
    panel: PricePanel, splits: ChronoSplits, weights: FloatArray, where: str = "weights"
) -> dict[str, Episode]:
    """Episodes per split from `weights[i]` = the weights held from bar start + i to +1.

    `weights` covers every decision bar of the fold (start .. stop - 2).
    """
    start, stop = fold_span(splits)
    w = check_weights(weights, where)
    if w.shape != (stop - 1 - start, panel.n_assets):
        raise ValueError(
            f"{where}: expected ({stop - 1 - start}, {panel.n_assets}) weights for bars"
            f" {start}..{stop - 2}, got {w.shape}"
        )
    turnover = np.zeros(w.shape[0])
    turnover[1:] = np.abs(np.diff(w, axis=0)).sum(axis=1)
    episodes: dict[str, Episode] = {}
    for split in splits:
        bars = split.decision_bars()
        rows = bars - start
        ws = w[rows]
        asset, gross = portfolio_returns(panel.closes, bars, ws)
        episodes[split.name] = Episode(
            split, panel.tickers, bars, ws, asset, gross, turnover[rows].copy(), ()
        )
    return episodes
