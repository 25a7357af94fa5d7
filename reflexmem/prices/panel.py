"""Close-price panels for the AEL portfolio benchmark, and their loaders.

The panel keeps two clocks per bar on purpose: the UTC instant (to order bars and
compare with evidence time stamps) and the calendar date as printed in the file's
own local time, because the benchmark splits by that printed date and a UTC date
would move the 15:30 New York bar across midnight in other zones.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt
import polars as pl

FloatArray = npt.NDArray[np.float64]

TIMESTAMP_NAMES = ("timestamp", "datetime", "date", "time", "ts")
TICKER_NAMES = ("ticker", "symbol")
CLOSE_NAMES = ("close", "adj_close", "price")
_DFULL_RELATIVE = Path("data") / "ael-dfull"


@dataclass(frozen=True, eq=False)
class PricePanel:
    """Aligned closes of several tickers on one shared bar clock.

    Arrays are made read-only so that a panel handed around (and the views cut
    from it) cannot be edited by an allocator to leak or fake prices.
    """

    timestamps: npt.NDArray[np.datetime64]
    local_dates: npt.NDArray[np.datetime64]
    tickers: tuple[str, ...]
    closes: FloatArray
    source: str = field(default="")

    def __post_init__(self) -> None:
        closes = np.array(self.closes, dtype=np.float64, copy=True)
        ts = np.array(self.timestamps, dtype="datetime64[us]", copy=True)
        dates = np.array(self.local_dates, dtype="datetime64[D]", copy=True)
        where = self.source or "panel"
        if closes.ndim != 2:
            raise ValueError(f"{where}: closes must be 2-D (bars x tickers), got {closes.ndim}-D")
        if closes.shape[1] != len(self.tickers):
            raise ValueError(
                f"{where}: {closes.shape[1]} close columns but {len(self.tickers)} tickers"
            )
        if len(self.tickers) < 2:
            raise ValueError(f"{where}: a portfolio panel needs at least 2 tickers")
        if len(set(self.tickers)) != len(self.tickers):
            raise ValueError(f"{where}: duplicate tickers {self.tickers}")
        if ts.shape != (closes.shape[0],) or dates.shape != (closes.shape[0],):
            raise ValueError(f"{where}: timestamps and local dates must have one entry per bar")
        if ts.size > 1 and not bool(np.all(ts[1:] > ts[:-1])):
            raise ValueError(f"{where}: timestamps must be strictly increasing")
        for arr in (closes, ts, dates):
            arr.setflags(write=False)
        object.__setattr__(self, "closes", closes)
        object.__setattr__(self, "timestamps", ts)
        object.__setattr__(self, "local_dates", dates)

    @property
    def n_bars(self) -> int:
        """Bars in the panel (rows)."""
        return int(self.closes.shape[0])

    @property
    def n_assets(self) -> int:
        """Tickers in the panel (columns)."""
        return int(self.closes.shape[1])

    def with_closes(self, closes: FloatArray) -> PricePanel:
        """Swap in other closes on the same clock, e.g. to poison the future in tests."""
        return PricePanel(self.timestamps, self.local_dates, self.tickers, closes, self.source)


def default_dfull_root(package_root: Path | None = None) -> Path:
    """Locate the D-full data shipped as package data (`reflexmem/data/ael-dfull`).

    Resolved from this file (reflexmem/prices/panel.py -> the `reflexmem` package), so an
    installed wheel finds it as well as a checkout, wherever the process was started;
    pass `package_root` to point at another copy of the package folder.
    """
    base = package_root if package_root is not None else Path(__file__).resolve().parents[1]
    return base / _DFULL_RELATIVE


def load_dfull(root: Path | None = None) -> PricePanel:
    """Load the ten hourly D-full close series as one aligned panel.

    Ticker order follows `tickers.json` (the paper's order) so weights line up with
    the published tables; files not listed there are appended in name order.
    """
    root = default_dfull_root() if root is None else root
    price_dir = root / "prices_1h"
    files = {p.stem: p for p in sorted(price_dir.glob("*.csv"))}
    if not files:
        raise ValueError(f"{price_dir}: no <TICKER>.csv files found")
    order: list[str] = []
    meta = root / "tickers.json"
    if meta.is_file():
        listed = json.loads(meta.read_text())
        order = [t for t in listed if t in files]
    order += [t for t in files if t not in order]

    reference: tuple[npt.NDArray[np.datetime64], npt.NDArray[np.datetime64]] | None = None
    columns: list[FloatArray] = []
    for ticker in order:
        path = files[ticker]
        frame = _read_frame(path)
        ts_col = _find_column(frame, TIMESTAMP_NAMES, path, "timestamp")
        close_col = _find_column(frame, CLOSE_NAMES, path, "close")
        instants, dates = _parse_timestamps(frame[ts_col], path)
        _check_unique(instants, path)
        if reference is None:
            reference = (instants, dates)
        elif instants.shape != reference[0].shape or not np.array_equal(instants, reference[0]):
            raise ValueError(
                f"{path}: misaligned tickers: timestamps differ from {order[0]}'s"
                f" ({instants.size} vs {reference[0].size} bars)"
            )
        columns.append(_numeric(frame[close_col], path, f"close of {ticker}"))
    assert reference is not None
    return PricePanel(
        reference[0], reference[1], tuple(order), np.column_stack(columns), str(price_dir)
    )


def load_panel(path: Path) -> PricePanel:
    """Load a close panel from CSV or Parquet in wide or long form.

    Long form is recognised by a ticker/symbol column next to a close column (names
    compared case-insensitively); anything else is read as wide form, one close
    column per ticker. Every problem is reported with the file name because these
    files come from users and a bare traceback would not say which one is broken.
    """
    frame = _read_frame(path)
    ts_col = _find_column(frame, TIMESTAMP_NAMES, path, "timestamp")
    lower = {c.lower(): c for c in frame.columns}
    ticker_col = next((lower[n] for n in TICKER_NAMES if n in lower), None)
    close_col = next((lower[n] for n in CLOSE_NAMES if n in lower), None)
    if ticker_col is not None and close_col is not None:
        return _long_panel(frame, path, ts_col, ticker_col, close_col)
    return _wide_panel(frame, path, ts_col)


def _wide_panel(frame: pl.DataFrame, path: Path, ts_col: str) -> PricePanel:
    tickers = [c for c in frame.columns if c != ts_col]
    if len(tickers) < 2:
        raise ValueError(
            f"{path}: fewer than 2 tickers (wide form needs one close column per ticker,"
            f" found {tickers})"
        )
    instants, dates = _parse_timestamps(frame[ts_col], path)
    _check_unique(instants, path)
    closes = np.column_stack([_numeric(frame[t], path, f"close column {t!r}") for t in tickers])
    order = np.argsort(instants, kind="stable")
    return PricePanel(instants[order], dates[order], tuple(tickers), closes[order], str(path))


def _long_panel(
    frame: pl.DataFrame, path: Path, ts_col: str, ticker_col: str, close_col: str
) -> PricePanel:
    instants, dates = _parse_timestamps(frame[ts_col], path)
    prices = _numeric(frame[close_col], path, f"close column {close_col!r}")
    names = frame[ticker_col].cast(pl.String).to_numpy().astype(str)
    tickers = tuple(dict.fromkeys(names.tolist()))
    if len(tickers) < 2:
        raise ValueError(f"{path}: fewer than 2 tickers (found {list(tickers)})")
    stamps, bar_index = np.unique(instants, return_inverse=True)
    ticker_pos = {t: i for i, t in enumerate(tickers)}
    distinct, name_index = np.unique(names, return_inverse=True)
    col_index = np.array([ticker_pos[str(n)] for n in distinct], dtype=np.int64)[name_index]
    cells = bar_index.astype(np.int64) * len(tickers) + col_index
    counts = np.bincount(cells, minlength=stamps.size * len(tickers))
    if np.any(counts > 1):
        dup = int(np.flatnonzero(counts > 1)[0])
        raise ValueError(
            f"{path}: duplicate timestamps: {tickers[dup % len(tickers)]} has more than one"
            f" row at {stamps[dup // len(tickers)]}"
        )
    if np.any(counts == 0):
        missing = np.flatnonzero(counts == 0)
        per_ticker = np.bincount(missing % len(tickers), minlength=len(tickers))
        worst = int(np.argmax(per_ticker))
        raise ValueError(
            f"{path}: misaligned tickers: {tickers[worst]} lacks {int(per_ticker[worst])} of"
            f" {stamps.size} timestamps (first missing {stamps[missing[0] // len(tickers)]})"
        )
    closes = np.empty(stamps.size * len(tickers), dtype=np.float64)
    closes[cells] = prices
    local = np.empty(stamps.size, dtype="datetime64[D]")
    local[bar_index] = dates
    return PricePanel(stamps, local, tickers, closes.reshape(stamps.size, len(tickers)), str(path))


def _read_frame(path: Path) -> pl.DataFrame:
    suffix = path.suffix.lower()
    if not path.is_file():
        raise ValueError(f"{path}: no such file")
    try:
        if suffix == ".csv":
            return pl.read_csv(path, infer_schema_length=None)
        if suffix in (".parquet", ".pq"):
            return pl.read_parquet(path)
    except pl.exceptions.PolarsError as exc:
        raise ValueError(f"{path}: cannot be read as {suffix[1:]}: {exc}") from exc
    raise ValueError(f"{path}: unsupported file type {suffix!r} (use .csv or .parquet)")


def _find_column(frame: pl.DataFrame, names: tuple[str, ...], path: Path, what: str) -> str:
    lower = {c.lower(): c for c in frame.columns}
    for name in names:
        if name in lower:
            return lower[name]
    raise ValueError(
        f"{path}: no {what} column (looked for {', '.join(names)}; found {frame.columns})"
    )


def _parse_timestamps(
    column: pl.Series, path: Path
) -> tuple[npt.NDArray[np.datetime64], npt.NDArray[np.datetime64]]:
    """Return (UTC instants, local calendar dates) of a timestamp column.

    Offsets in the text are honoured for the instant, while the date is the one
    printed, so a DST switch changes neither the split nor the bar order.
    """
    dtype = column.dtype
    if dtype == pl.String:
        instants = column.str.to_datetime(strict=False, time_zone="UTC", time_unit="us")
        printed = column.str.slice(0, 10).str.to_date("%Y-%m-%d", strict=False)
        local = printed.fill_null(instants.dt.date())
    elif isinstance(dtype, pl.Datetime):
        local = column.dt.date()
        if dtype.time_zone is None:
            instants = column.dt.replace_time_zone("UTC")
        else:
            instants = column.dt.convert_time_zone("UTC")
    elif dtype == pl.Date:
        local = column
        instants = column.cast(pl.Datetime("us")).dt.replace_time_zone("UTC")
    else:
        raise ValueError(f"{path}: timestamp column {column.name!r} has type {dtype}, not a time")
    nulls = instants.is_null()
    if nulls.any():
        rows = np.flatnonzero(nulls.to_numpy())[:3].tolist()
        raise ValueError(
            f"{path}: unparseable timestamps in column {column.name!r} at rows {rows}"
            f" (e.g. {column[rows[0]]!r})"
        )
    utc = instants.dt.replace_time_zone(None).dt.cast_time_unit("us").to_numpy()
    return utc.astype("datetime64[us]"), local.to_numpy().astype("datetime64[D]")


def _check_unique(instants: npt.NDArray[np.datetime64], path: Path) -> None:
    uniq, counts = np.unique(instants, return_counts=True)
    if np.any(counts > 1):
        raise ValueError(
            f"{path}: duplicate timestamps ({int(np.sum(counts > 1))} repeated,"
            f" first {uniq[counts > 1][0]})"
        )


def _numeric(column: pl.Series, path: Path, what: str) -> FloatArray:
    if column.dtype.is_numeric():
        values = column.cast(pl.Float64)
    elif column.dtype == pl.String:
        values = column.str.strip_chars().cast(pl.Float64, strict=False)
    else:
        raise ValueError(f"{path}: non-numeric {what} (type {column.dtype})")
    bad = (values.is_null() | values.is_nan() | (values <= 0.0)).fill_null(True)
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise ValueError(
            f"{path}: non-numeric {what} at row {row}: {column[row]!r}"
            " (closes must be positive numbers)"
        )
    return values.to_numpy().astype(np.float64)
