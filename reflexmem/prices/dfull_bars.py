"""The packaged D-full sample as a bars file, so the demo and tests load it like user data.

The sample ships as one CSV per symbol (`prices_1h/` hourly bars with UTC offsets, and
`prices_daily/` daily bars). `dfull_bar_frames` turns them into one frame under the
`bars` file contract: every hourly symbol with all its columns, plus the daily bars of
the symbols the hourly panel lacks (SPY, the benchmark), each daily close stamped at
the 16:00 New York close in UTC exactly as `prices.read_daily_csv` does. Ingesting it
(kind `bars`) and reading it back through `LedgerPrices` gives the same series as
`dfull_prices()` (a test holds them equal, stamp for stamp and close for close).

`daily=True` gives the daily bars of every symbol instead (nine months where the hourly
panel has two and a half): what the demo learns on, since a rule's contrast counts
two-week blocks of decision time and needs five to form and five more to confirm.
`daily_panel` is the same daily closes as a panel for the stream generator.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from reflexmem.prices.panel import PricePanel, default_dfull_root
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


def dfull_bar_frames(root: Path | None = None, *, daily: bool = False) -> pl.DataFrame:
    """Every D-full bar under the bars contract, sorted by (symbol, ts).

    Hourly symbols as hourly bars (the benchmark's daily bars beside them), or with
    `daily` every symbol's daily bars.
    """
    base = default_dfull_root() if root is None else root
    hourly = {p.stem: p for p in sorted((base / "prices_1h").glob("*.csv"))}
    if not hourly:
        raise ValueError(f"{base / 'prices_1h'}: no <SYMBOL>.csv files")
    frames = [] if daily else [_hourly(p) for p in hourly.values()]
    frames += [
        _daily(p)
        for p in sorted((base / "prices_daily").glob("*.csv"))
        if daily or p.stem not in hourly
    ]
    bars = pl.concat([f.select(BAR_SCHEMA.names()).cast(BAR_SCHEMA) for f in frames])
    if bars["ts"].is_null().any():
        raise ValueError(f"{base}: a D-full timestamp could not be parsed")
    return bars.sort("symbol", "ts")


def write_dfull_bars(folder: Path, root: Path | None = None, *, daily: bool = False) -> Path:
    """Write `bars-dfull.parquet` into `folder` (ingest it with kind `bars`)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / FILE_NAME
    dfull_bar_frames(root, daily=daily).write_parquet(path)
    return path


def daily_panel(root: Path | None = None) -> PricePanel:
    """The hourly panel's symbols as daily closes on the dates they all share."""
    base = default_dfull_root() if root is None else root
    symbols = sorted(p.stem for p in (base / "prices_1h").glob("*.csv"))
    wide = (
        dfull_bar_frames(base, daily=True)
        .filter(pl.col("symbol").is_in(symbols))
        .pivot("symbol", index="ts", values="close")
        .drop_nulls()
        .sort("ts")
    )
    ts = wide["ts"].dt.replace_time_zone(None).to_numpy().astype("datetime64[us]")
    local = wide["ts"].dt.convert_time_zone("America/New_York").dt.date().to_numpy()
    return PricePanel(
        ts,
        local.astype("datetime64[D]"),
        tuple(symbols),
        wide.select(symbols).to_numpy(),
        str(base / "prices_daily"),
    )
