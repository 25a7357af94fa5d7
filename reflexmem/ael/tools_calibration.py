"""How the composite signal's momentum weight was chosen: train + validation only.

The composite score of `tools.composite_signal` is
w_mom z(momentum) + 0.25 z(SMA distance) - 0.15 z(RSI) - 0.15 z(risk). The three
other weights are a priori (trend confirms, stretched or risky names are tempered);
the momentum weight is chosen from `MOMENTUM_WEIGHT_GRID` by the mean cross-sectional
rank correlation (information coefficient) of the composite score at bar t with the
returns of bar t -> t+1, over every decision bar of D-full's train and validation
splits, on a panel cut after the last validation bar (the test split is not loaded).
Ties go to the smaller weight. `derive_momentum_weight()` reproduces the constant
`tools.MOMENTUM_WEIGHT` (a test holds them equal and checks that poisoning the test
prices changes nothing).
"""

from __future__ import annotations

import numpy as np

from reflexmem.ael.environment import MarketEnvironment
from reflexmem.ael.splits import ChronoSplits
from reflexmem.ael.tools import ToolConfig, composite_parts
from reflexmem.prices.panel import FloatArray, PricePanel

MOMENTUM_WEIGHT_GRID = (0.0, 0.15, 0.30, 0.45, 0.60)


def _rank_ic(score: FloatArray, ahead: FloatArray) -> float:
    a = np.argsort(np.argsort(score, kind="stable"), kind="stable").astype(float)
    b = np.argsort(np.argsort(ahead, kind="stable"), kind="stable").astype(float)
    a -= a.mean()
    b -= b.mean()
    denom = float(np.sqrt((a * a).sum() * (b * b).sum()))
    return float((a * b).sum() / denom) if denom > 0 else 0.0


def momentum_weight_scores(
    panel: PricePanel, splits: ChronoSplits, grid: tuple[float, ...] = MOMENTUM_WEIGHT_GRID
) -> dict[float, float]:
    """Mean rank IC of the composite per candidate weight over train + val decisions."""
    stop = splits.val.stop
    cut = PricePanel(
        panel.timestamps[:stop], panel.local_dates[:stop], panel.tickers, panel.closes[:stop]
    )
    env = MarketEnvironment(cut)
    bars = np.concatenate([splits.train.decision_bars(), splits.val.decision_bars()])
    parts = []
    ahead = []
    for t in bars.tolist():
        parts.append(composite_parts(env.view(t), ToolConfig()))
        ahead.append(cut.closes[t + 1] / cut.closes[t] - 1.0)
    scores: dict[float, float] = {}
    for w in grid:
        ics = [_rank_ic(w * mom + rest, fwd) for (mom, rest), fwd in zip(parts, ahead, strict=True)]
        scores[float(w)] = float(np.mean(ics))
    return scores


def derive_momentum_weight(panel: PricePanel, splits: ChronoSplits) -> float:
    """The grid weight with the best train + val IC (ties: the smaller)."""
    scores = momentum_weight_scores(panel, splits)
    return max(scores, key=lambda w: (scores[w], -w))
