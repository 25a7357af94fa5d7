"""Equity-curve plots of episodes (PNG).

matplotlib is imported inside the function and drives the Agg canvas directly
(no pyplot, no global backend switch), so importing this module costs nothing
and plotting works headless without touching other code's matplotlib state.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from reflexmem.ael.environment import Episode
from reflexmem.prices.panel import FloatArray, PricePanel


def equity_curve(episode: Episode, cost_bp: float = 0.0) -> FloatArray:
    """Compounded value starting at 1 before the first counted return."""
    net = episode.net_returns(cost_bp)
    return np.asarray(np.concatenate([[1.0], np.cumprod(1.0 + net)]), dtype=np.float64)


def plot_equity_curves(
    episodes: Mapping[str, Episode],
    panel: PricePanel,
    out_dir: Path,
    *,
    cost_bp: float = 0.0,
    filename: str | None = None,
    title: str | None = None,
) -> Path:
    """Draw one curve per method on a shared time axis; return the PNG's path.

    `episodes` maps a label (method name) to an episode over the same split;
    the x axis counts bars from the split's first bar, labelled by trading date.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    if not episodes:
        raise ValueError("no episodes to plot")
    first = next(iter(episodes.values()))
    split = first.split
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / (filename or f"equity_{split.name}_{cost_bp:g}bp.png")
    fig = Figure(figsize=(9, 5), dpi=110)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    for label, episode in episodes.items():
        if episode.split != split:
            raise ValueError(f"{label}: episode is on split {episode.split}, expected {split}")
        ax.plot(np.arange(episode.n_returns + 1), equity_curve(episode, cost_bp), label=label)
    # Bars, not clock time, on the x axis: nights and weekends would otherwise
    # dominate the picture. Ticks mark the first bar of each printed date.
    dates = panel.local_dates[split.start : split.start + first.n_returns + 1]
    starts = np.flatnonzero(np.concatenate([[True], dates[1:] != dates[:-1]]))
    ax.set_xticks(starts, [str(d) for d in dates[starts]], rotation=30, ha="right", fontsize=8)
    ax.axhline(1.0, color="0.6", linewidth=0.8, linestyle="--")
    ax.set_title(title or f"Equity on the {split.name} split ({cost_bp:g} bp costs)")
    ax.set_xlabel("bar (labels: trading date as printed in the data)")
    ax.set_ylabel("portfolio value")
    ax.legend(loc="best", fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    return path
