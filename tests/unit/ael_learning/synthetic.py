"""Synthetic wide CSV panels for the AEL learning tests."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

TICKERS = ("AAA", "BBB", "CCC", "DDD")


def write_wide_csv(path: Path, n_bars: int = 100, seed: int = 7) -> Path:
    """Geometric random walks with mild drift, four hourly bars per day."""
    rng = np.random.default_rng(seed)
    rets = rng.normal(0.0004, 0.006, size=(n_bars, len(TICKERS)))
    closes = 100.0 * np.cumprod(1.0 + rets, axis=0)
    start = datetime(2024, 6, 3, 9, 30)
    lines = ["timestamp," + ",".join(TICKERS)]
    for i in range(n_bars):
        stamp = start + timedelta(days=i // 4, hours=2 * (i % 4))
        lines.append(stamp.isoformat() + "," + ",".join(f"{c:.4f}" for c in closes[i]))
    path.write_text("\n".join(lines) + "\n")
    return path
