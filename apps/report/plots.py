"""The report's charts: matplotlib PNGs as `data:` URIs, so the page needs no other file.

Figures are drawn on the Agg canvas directly (no pyplot global state), at a fixed size
and DPI, and encoded as base64 PNG; an existing PNG (the benchmark's equity curves) is
embedded the same way.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np


def _figure(width: float = 7.0, height: float = 3.2) -> tuple[Any, Any]:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot(1, 1, 1)


def _uri(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def png_uri(path: Path) -> str:
    """An existing PNG file as a data URI."""
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode()


def bars(title: str, labels: Sequence[str], values: Sequence[float], xlabel: str) -> str:
    """A horizontal bar chart."""
    fig, ax = _figure(7.0, max(1.6, 0.32 * len(labels) + 0.8))
    y = np.arange(len(labels))
    ax.barh(y, values, color="#4c72b0")
    ax.set_yticks(y, labels)
    ax.invert_yaxis()
    ax.set_xlabel(xlabel)
    ax.set_title(title)
    return _uri(fig)


def stacked(
    title: str, groups: Sequence[str], series: Mapping[str, Sequence[float]], xlabel: str
) -> str:
    """Horizontal bars per group, stacked by series (e.g. outcome class per role)."""
    fig, ax = _figure(7.0, max(1.8, 0.4 * len(groups) + 1.0))
    y = np.arange(len(groups))
    left = np.zeros(len(groups))
    for name, values in series.items():
        v = np.asarray(values, dtype=float)
        ax.barh(y, v, left=left, label=name)
        left += v
    ax.set_yticks(y, groups)
    ax.invert_yaxis()
    ax.set_xlabel(xlabel)
    ax.set_title(title)
    ax.legend(fontsize=8, loc="lower right")
    return _uri(fig)


def posteriors(labels: Sequence[str], alpha: Sequence[float], beta: Sequence[float]) -> str:
    """Beta posterior means with central 90% intervals, one row per arm."""
    from scipy.stats import beta as beta_dist

    a, b = np.asarray(alpha, dtype=float), np.asarray(beta, dtype=float)
    mean = a / (a + b)
    low, high = beta_dist.ppf(0.05, a, b), beta_dist.ppf(0.95, a, b)
    fig, ax = _figure(7.0, max(1.8, 0.28 * len(labels) + 1.0))
    y = np.arange(len(labels))
    ax.errorbar(mean, y, xerr=[mean - low, high - mean], fmt="o", capsize=3)
    ax.set_yticks(y, labels)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("posterior success probability (mean, 90% interval)")
    ax.set_title("retrieval-policy bandits")
    return _uri(fig)
