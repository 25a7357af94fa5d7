"""Price providers: where settlement and evaluation get the prices of one batch.

A `PriceSource` answers per symbol; a provider hands one out for a whole batch of
symbols at once, so a stage that settles a million positions on a thousand symbols asks
once, not a thousand times. Three providers share the protocol:

- `LedgerPrices`: the `market_bars` table (what `reflexmem ingest` loaded, kind `bars`),
  read with ONE statement per batch whatever the number of symbols: the symbol list
  travels as one array parameter (PostgreSQL `= ANY(...)`) or one JSON parameter
  (SQLite `json_each`), so there is neither a statement per symbol nor a bound on the
  IN list.
- `PanelPrices`: a price file or folder outside the ledger (a wide or long panel, a
  D-full style folder of hourly and daily files), loaded once.
- `MappingPrices` (in `prices`): in-memory series, for tests.
"""

from __future__ import annotations

import functools
import itertools
import json
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Protocol

import numpy as np
import polars as pl
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from reflexmem.ledger.market_models import MarketBar
from reflexmem.ledger.sqlio import to_utc
from reflexmem.prices.panel import PricePanel, load_dfull, load_panel
from reflexmem.prices.series import (
    MappingPrices,
    PriceSeries,
    PriceSource,
    bars_per_day,
    read_daily_csv,
    series_from_panel,
)

DAY_END = np.timedelta64(86_400_000_000 - 1, "us")
"""A bare date's close is stamped at the last microsecond of its UTC day (as in ingest)."""

PG_SQL = (
    "SELECT symbol, ts AT TIME ZONE 'UTC' AS ts, close FROM market_bars "
    "WHERE symbol = ANY(:symbols) ORDER BY symbol, ts"
)
SQLITE_SQL = (
    "SELECT symbol, ts, close FROM market_bars "
    "WHERE symbol IN (SELECT value FROM json_each(:symbols)) ORDER BY symbol, ts"
)


class PriceProvider(Protocol):
    """Hands out the prices of a batch of symbols, and says how far its prices reach."""

    def for_symbols(self, symbols: Iterable[str]) -> PriceSource:
        """A source carrying every requested symbol it knows (one query for the batch)."""
        ...

    def newest(self) -> datetime | None:
        """The newest bar stamp over all symbols (aware UTC), None when there is none."""
        ...


def series_from_long(symbols: pl.Series, stamps: pl.Series, closes: pl.Series) -> MappingPrices:
    """Per-symbol series from rows sorted by (symbol, ts); `stamps` naive UTC."""
    if symbols.len() == 0:
        return MappingPrices({})
    sym = symbols.to_numpy().astype(str)
    ts = stamps.dt.cast_time_unit("us").to_numpy().astype("datetime64[us]")
    px = closes.cast(pl.Float64).to_numpy()
    cuts = np.concatenate(([0], np.flatnonzero(sym[1:] != sym[:-1]) + 1, [sym.size]))
    out: dict[str, PriceSeries] = {}
    for a, b in itertools.pairwise(cuts.tolist()):
        t = ts[a:b]
        out[str(sym[a])] = PriceSeries(t, px[a:b], bars_per_day(t))
    return MappingPrices(out)


class LedgerPrices:
    """Prices from the ledger's `market_bars`.

    Pass an engine, or a connection to read inside the caller's transaction (e.g. bars
    ingested in it and not committed yet).
    """

    def __init__(self, bind: sa.Engine | sa.Connection) -> None:
        self._bind = bind

    def _run(self, statement: sa.Executable, params: dict[str, object]) -> list[sa.Row[object]]:
        if isinstance(self._bind, sa.Connection):
            return list(self._bind.execute(statement, params).fetchall())
        with self._bind.connect() as conn:
            return list(conn.execute(statement, params).fetchall())

    def _dialect(self) -> str:
        return self._bind.dialect.name

    def for_symbols(self, symbols: Iterable[str]) -> MappingPrices:
        """Every stored bar of `symbols`, by one SELECT ordered by (symbol, ts)."""
        wanted = sorted(set(symbols))
        if not wanted:
            return MappingPrices({})
        if self._dialect() == "postgresql":
            statement = sa.text(PG_SQL).bindparams(
                sa.bindparam("symbols", type_=postgresql.ARRAY(sa.String))
            )
            params: dict[str, object] = {"symbols": wanted}
        else:
            statement = sa.text(SQLITE_SQL)
            params = {"symbols": json.dumps(wanted)}
        rows = self._run(statement, params)
        if not rows:
            return MappingPrices({})
        sym, ts, close = zip(*rows, strict=True)
        stamps = pl.Series("ts", ts)
        if stamps.dtype == pl.String:
            stamps = stamps.str.to_datetime("%Y-%m-%d %H:%M:%S%.f", time_unit="us")
        return series_from_long(
            pl.Series("symbol", sym, dtype=pl.String), stamps, pl.Series("close", close)
        )

    def newest(self) -> datetime | None:
        """`MAX(ts)` over all bars (the `ts` index makes it one index probe)."""
        rows = self._run(sa.select(sa.func.max(MarketBar.ts)), {})
        stamp = rows[0][0] if rows else None
        if not isinstance(stamp, datetime):
            return None
        return to_utc(stamp)


def _midnights_to_day_end(series: dict[str, PriceSeries]) -> dict[str, PriceSeries]:
    """A panel printed as bare dates (every stamp midnight UTC) closes at the day's end."""
    out = {}
    for name, s in series.items():
        ts = s.timestamps
        daily = ts.size > 0 and bool(np.all(ts == ts.astype("datetime64[D]")))
        out[name] = PriceSeries(ts + DAY_END, s.closes, s.bars_per_day) if daily else s
    return out


def _read_folder(root: Path) -> dict[str, PriceSeries]:
    """A D-full style folder: `prices_1h/` panel, plus `prices_daily/` symbols it lacks."""
    series: dict[str, PriceSeries] = {}
    if (root / "prices_1h").is_dir():
        series = series_from_panel(load_dfull(root))
    for path in sorted((root / "prices_daily").glob("*.csv")):
        if path.stem not in series:
            series[path.stem] = read_daily_csv(path)
    if not series:
        raise ValueError(f"{root}: no prices_1h/*.csv or prices_daily/*.csv price files")
    return series


def _read_file(path: Path) -> dict[str, PriceSeries]:
    """A panel file (wide or long, see `load_panel`) or one symbol's `Date,Close` file."""
    if path.suffix.lower() == ".csv":
        header = {c.lower() for c in pl.read_csv(path, n_rows=0).columns}
        if {"date", "close"} <= header and not header & {"ticker", "symbol"}:
            return {path.stem: read_daily_csv(path)}
    panel: PricePanel = load_panel(path)
    return _midnights_to_day_end(series_from_panel(panel))


class PanelPrices:
    """Prices from files outside the ledger, read once on first use.

    `path` is one of: a panel file (CSV or Parquet, wide or long, see
    `reflexmem.prices.panel.load_panel`; a panel of bare dates is stamped at the end of
    each UTC day, as ingest does); a single symbol's daily `Date,Close,...` CSV (symbol =
    file stem, closes at 16:00 New York); or a folder laid out like the D-full sample
    (`prices_1h/<SYMBOL>.csv` hourly, `prices_daily/<SYMBOL>.csv` daily for the symbols
    the hourly panel lacks).
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    @functools.cached_property
    def _all(self) -> MappingPrices:
        if self.path.is_dir():
            return MappingPrices(_read_folder(self.path))
        return MappingPrices(_read_file(self.path))

    def for_symbols(self, symbols: Iterable[str]) -> MappingPrices:
        """The requested symbols the files carry."""
        return self._all.for_symbols(symbols)

    def newest(self) -> datetime | None:
        """The newest bar over all symbols of the files."""
        return self._all.newest()

    @property
    def symbols(self) -> tuple[str, ...]:
        """Every symbol the files carry, sorted."""
        return self._all.symbols
