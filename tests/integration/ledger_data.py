"""Small hand-made ledger streams for integration tests."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from reflexmem.synth import generate, synthetic_prices, write_stream


def small_stream(n: int = 300, seed: int = 3) -> dict[str, pl.DataFrame]:
    return generate(synthetic_prices(seed=seed), n, seed=seed)


def write_small(tmp: Path, n: int = 300, fmt: str = "parquet", seed: int = 3) -> list[Path]:
    return write_stream(small_stream(n, seed), tmp, fmt=fmt)
