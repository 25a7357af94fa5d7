"""The packaged D-full sample as a bars file, so the demo and tests load it like user data.

The sample ships as one CSV per symbol (`prices_1h/` hourly bars with UTC offsets, and
`prices_daily/` daily bars). `dfull_bar_frames` turns them into one frame under the
`bars` file contract: every hourly symbol with all its columns, plus the daily bars of
the symbols the hourly panel lacks (SPY, the benchmark), each daily close stamped at
the 16:00 New York close in UTC exactly as `prices.read_daily_csv` does. Ingesting it
(kind `bars`) and reading it back through `LedgerPrices` gives the same series as
`dfull_prices()` (a test holds them equal, stamp for stamp and close for close).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from reflexmem.prices.panel import default_dfull_root
from reflexmem.prices.series import daily_close_stamp

BAR_SCHEMA = pl.Schema(
    {
        "symbol": pl.String(),
        "ts": pl.Datetime("us", "UTC"),
        "open": pl.Float64(),
        "high": pl.Float64(),
        "low": pl.Float64(),
        "close": pl.Float64(),
        "volume": pl.Float64(),
    }
)
FILE_NAME = "bars-dfull.parquet"


def _columns(frame: pl.DataFrame, stamp: str) -> dict[str, str]:
    lower = {c.lower(): c for c in frame.columns}
    wanted = (stamp, "open", "high", "low", "close", "volume")
    missing = [w for w in wanted if w not in lower]
    if missing:
        raise ValueError(f"D-full price file lacks {missing} (has {frame.columns})")
    return {w: lower[w] for w in wanted}


def _prices(frame: pl.DataFrame, names: dict[str, str]) -> list[pl.Expr]:
    return [pl.col(names[c]).cast(pl.Float64).alias(c) for c in ("open", "high", "low", "close")]


def _hourly(path: Path) -> pl.DataFrame:
    frame = pl.read_csv(path, infer_schema_length=None)
    names = _columns(frame, "datetime")
    stamps = pl.col(names["datetime"]).str.to_datetime(
        strict=False, time_zone="UTC", time_unit="us"
    )
    return frame.select(
        pl.lit(path.stem).alias("symbol"),
        stamps.alias("ts"),
        *_prices(frame, names),
        pl.col(names["volume"]).cast(pl.Float64).alias("volume"),
    )


def _daily(path: Path) -> pl.DataFrame:
    frame = pl.read_csv(path, infer_schema_length=None, try_parse_dates=False)
    names = _columns(frame, "date")
    out = frame.select(
        pl.lit(path.stem).alias("symbol"),
        daily_close_stamp(pl.col(names["date"])).dt.replace_time_zone("UTC").alias("ts"),
        *_prices(frame, names),
        pl.col(names["volume"]).cast(pl.Float64).alias("volume"),
    ).drop_nulls(["ts", "close"])
    return out.sort("ts").unique("ts", keep="last", maintain_order=True)


def dfull_bar_frames(root: Path | None = None) -> pl.DataFrame:
    """Every D-full bar under the bars contract, sorted by (symbol, ts)."""
    base = default_dfull_root() if root is None else root
    hourly = {p.stem: p for p in sorted((base / "prices_1h").glob("*.csv"))}
    if not hourly:
        raise ValueError(f"{base / 'prices_1h'}: no <SYMBOL>.csv files")
    frames = [_hourly(p) for p in hourly.values()]
    frames += [
        _daily(p) for p in sorted((base / "prices_daily").glob("*.csv")) if p.stem not in hourly
    ]
    bars = pl.concat([f.select(BAR_SCHEMA.names()).cast(BAR_SCHEMA) for f in frames])
    if bars["ts"].is_null().any():
        raise ValueError(f"{base}: a D-full timestamp could not be parsed")
    return bars.sort("symbol", "ts")


def write_dfull_bars(folder: Path, root: Path | None = None) -> Path:
    """Write `bars-dfull.parquet` into `folder` (ingest it with kind `bars`)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / FILE_NAME
    dfull_bar_frames(root).write_parquet(path)
    return path
