"""Market bars through `ingest`: parse errors fail the file, bad bars are quarantined."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from expectations.bars import validate_bars
from reflexmem.ingest.load import IngestReport, ingest_files
from reflexmem.ingest.read import IngestError
from reflexmem.prices.dfull_bars import daily_panel, write_dfull_bars
from reflexmem.prices.panel import default_dfull_root
from reflexmem.prices.providers import LedgerPrices
from reflexmem.prices.series import dfull_prices, read_daily_csv

NOW = datetime(2025, 6, 1, tzinfo=UTC)
COLUMNS = ("symbol", "ts", "open", "high", "low", "close", "volume")
INF, NAN = float("inf"), float("nan")

STORED = [
    ("S1", "2025-01-02T15:00:00Z", 99.0, 101.0, 98.0, 100.0, 10.0),
    ("S1", "2025-01-03T15:00:00Z", 100.0, 102.0, 99.0, 101.0, 10.0),
    ("S1", "2025-01-06T15:00:00Z", 101.0, 103.0, 100.0, 102.0, 10.0),
]
# (row, bar, expected primary reason or None for a bar that loads)
BARS: list[tuple[tuple[object, ...], str | None]] = [
    (("G", "2025-01-02", 9.0, 11.0, 8.0, 10.0, 5.0), None),
    (("G", "2025-01-03T15:00:00Z", 10.0, 12.0, 9.0, 11.0, None), None),
    (("G", "2025-01-04", 10.0, 11.0, 9.0, None, 5.0), "bar_close_missing"),
    (("G", "2025-01-05", 10.0, 11.0, 9.0, 0.0, 5.0), "bar_close_invalid"),
    (("G", "2025-01-06", -1.0, 11.0, 9.0, 10.0, 5.0), "bar_open_invalid"),
    (("G", "2025-01-07", 10.0, INF, 9.0, 10.0, 5.0), "bar_high_invalid"),
    (("G", "2025-01-08", 10.0, 11.0, NAN, 10.0, 5.0), "bar_low_invalid"),
    (("G", "2025-01-09", 10.0, 11.0, 9.0, 10.0, -3.0), "bar_volume_invalid"),
    (("G", "2025-01-10", 9.5, 9.0, 10.0, 9.5, 5.0), "bar_high_below_low"),
    (("H", "2025-07-01", 1.0, 1.0, 1.0, 1.0, 1.0), "bar_in_future"),
    (("D", "2025-01-02T15:00:00Z", 1.0, 1.0, 1.0, 1.0, 1.0), "bar_duplicate"),
    (("D", "2025-01-02T15:00:00Z", 1.0, 1.0, 1.0, 1.0, 1.0), "bar_duplicate"),
    (("G", "2024-12-31", 10.0, 11.0, 9.0, 10.0, 5.0), "bar_not_increasing"),
    (("S1", "2025-01-02T15:00:00Z", 99.0, 101.0, 98.0, 100.5, 10.0), "bar_close_conflict"),
    (("S1", "2025-01-03T15:00:00Z", 100.0, 102.0, 99.0, 101.0, 11.0), "bar_fields_conflict"),
    (("S1", "2025-01-06T15:00:00Z", 101.0, 103.0, 100.0, 102.0, 10.0), None),  # unchanged
    (("S1", "2025-01-07T15:00:00Z", 102.0, 104.0, 101.0, 103.0, 10.0), None),
]


def _frame(rows: Sequence[tuple[object, ...]]) -> pl.DataFrame:
    return pl.DataFrame(
        rows,
        schema={"symbol": pl.String, "ts": pl.String} | dict.fromkeys(COLUMNS[2:], pl.Float64),
        orient="row",
    )


def _write(frame: pl.DataFrame, path: Path) -> Path:
    if path.suffix == ".parquet":
        frame.write_parquet(path)
    else:
        frame.write_csv(path)
    return path


def _ingest(
    engine: sa.Engine,
    paths: list[Path],
    *,
    now: datetime = NOW,
    kinds: list[str | None] | None = None,
) -> IngestReport:
    with engine.begin() as conn:
        return ingest_files(conn, paths, kinds=kinds, validate_bars=validate_bars, now=now)


def _count(engine: sa.Engine, table: str) -> int:
    with engine.connect() as conn:
        return int(conn.execute(sa.text(f"SELECT COUNT(*) FROM {table}")).scalar_one())


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_bad_bars_are_quarantined_with_their_reason_and_the_rest_loads(
    engine: sa.Engine, tmp_path: Path, fmt: str
) -> None:
    _ingest(engine, [_write(_frame(STORED), tmp_path / f"bars-stored.{fmt}")])
    path = _write(_frame([b for b, _ in BARS]), tmp_path / f"bars-b.{fmt}")
    report = _ingest(engine, [path])

    bad = {i + 1: reason for i, (_, reason) in enumerate(BARS) if reason}
    assert report.added["bars"] == 3
    assert report.unchanged_rows["bars"] == 1
    assert report.quarantined["bars"] == len(bad) == 13
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT subject_kind, subject_id, reason_code, failed_expectations, detail,"
                " batch_id FROM quarantine"
            )
        ).all()
        sha = conn.execute(
            sa.text("SELECT sha256 FROM ingested_files WHERE path = :p"), {"p": str(path)}
        ).scalar_one()
    got = {int(r.subject_id.rsplit(":", 1)[1]): r for r in rows}
    assert {n: r.reason_code for n, r in got.items()} == bad
    assert {r.subject_kind for r in rows} == {"bar"}
    assert all(r.subject_id == f"bar:{sha[:12]}:{n}" for n, r in got.items())
    assert all(len(r.subject_id) <= 64 and r.batch_id == sha for r in rows)
    assert got[12].failed_expectations == "bar_duplicate,bar_not_increasing"
    assert all(r.reason_code in r.failed_expectations.split(",") for r in rows)
    assert "symbol=G ts=2025-01-05T23:59:59.999999+00:00" in got[4].detail
    assert "close=0.0" in got[4].detail
    assert "stored_close=100.0" in got[14].detail
    assert report.quarantine_reasons["bar_duplicate"] == 2

    prices = LedgerPrices(engine).for_symbols(["G", "S1", "H", "D"])
    assert prices.symbols == ("G", "S1")
    g = prices.series("G")
    assert g is not None
    assert g.timestamps.tolist() == [
        datetime(2025, 1, 2, 23, 59, 59, 999999),
        datetime(2025, 1, 3, 15, 0),
    ]
    s1 = prices.series("S1")
    assert s1 is not None
    assert s1.closes.tolist() == [100.0, 101.0, 102.0, 103.0]


def test_reingesting_bars_is_a_no_op(engine: sa.Engine, tmp_path: Path) -> None:
    frame = _frame([b for b, _ in BARS])
    path = _write(frame, tmp_path / "bars.csv")
    first = _ingest(engine, [path])
    before = (_count(engine, "market_bars"), _count(engine, "quarantine"))
    again = _ingest(engine, [path])
    assert again.skipped_files == [path]
    assert again.total_added == 0
    assert again.total_quarantined == 0
    with engine.connect() as conn:
        held = conn.execute(sa.text("SELECT subject_id FROM quarantine")).scalars().all()
    rows = {int(s.rsplit(":", 1)[1]) for s in held}
    good = frame.with_row_index("n", offset=1).filter(~pl.col("n").is_in(rows)).drop("n")
    copy = _ingest(engine, [_write(good, tmp_path / "bars-copy.parquet")])
    assert copy.added["bars"] == 0
    assert copy.unchanged_rows["bars"] == first.added["bars"]
    assert copy.total_quarantined == 0
    assert (_count(engine, "market_bars"), _count(engine, "quarantine")) == before


def _csv_with(tmp_path: Path, column: str, value: str) -> Path:
    frame = _frame(
        [(f"S{i}", f"2025-01-0{i}", 1.0, 2.0, 0.5, 1.5, 10.0) for i in range(1, 6)]
    ).with_columns(pl.all().cast(pl.String))
    frame = frame.with_columns(
        pl.when(pl.int_range(pl.len()) == 2)
        .then(pl.lit(value))
        .otherwise(pl.col(column))
        .alias(column)
    )
    return _write(frame, tmp_path / "bars-bad.csv")


@pytest.mark.parametrize(
    ("column", "value", "message"),
    [
        ("close", "ten", r"row 3, column 'close': cannot parse 'ten' as float"),
        ("ts", "2025-13-45", r"row 3, column 'ts': cannot parse '2025-13-45' as timestamp"),
        ("symbol", "", r"row 3, column 'symbol': is empty but required"),
        ("symbol", "X" * 33, r"row 3, column 'symbol': .* is longer than 32 characters"),
    ],
)
def test_an_unparseable_bars_file_writes_nothing_and_names_row_and_column(
    engine: sa.Engine, tmp_path: Path, column: str, value: str, message: str
) -> None:
    good = _write(_frame(STORED), tmp_path / "bars-good.csv")
    bad = _csv_with(tmp_path, column, value)
    with pytest.raises(IngestError, match=message) as info:
        _ingest(engine, [good, bad])
    assert str(bad) in str(info.value)
    assert _count(engine, "market_bars") == _count(engine, "quarantine") == 0
    assert _count(engine, "ingested_files") == 0


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda f: f.drop("close"), r"missing required column\(s\): close"),
        (lambda f: f.with_columns(adj_close=pl.lit(1.0)), r"unknown column\(s\) 'adj_close'"),
    ],
)
def test_a_missing_or_unknown_bars_column_is_named(
    engine: sa.Engine,
    tmp_path: Path,
    change: Callable[[pl.DataFrame], pl.DataFrame],
    message: str,
) -> None:
    path = _write(change(_frame(STORED)), tmp_path / "bars.csv")
    with pytest.raises(IngestError, match=message):
        _ingest(engine, [path])
    assert _count(engine, "market_bars") == 0


def test_a_broken_jsonl_line_is_named_by_its_line_number(engine: sa.Engine, tmp_path: Path) -> None:
    lines = [json.dumps(dict(zip(COLUMNS, bar, strict=True))) for bar in STORED]
    lines.insert(2, '{"symbol": "S1", "ts": "2025-01-05", "close": 1')
    path = tmp_path / "bars.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(IngestError, match=r"bars\.jsonl, row 3: line 3 is not a JSON object"):
        _ingest(engine, [path])
    assert _count(engine, "market_bars") == 0
    good = tmp_path / "bars-ok.jsonl"
    good.write_text("\n".join(lines[:2] + lines[3:]) + "\n")
    assert _ingest(engine, [good]).added["bars"] == 3


def test_date_only_bars_close_at_the_end_of_their_utc_day(
    engine: sa.Engine, tmp_path: Path
) -> None:
    csv = _write(_frame([("A", "2025-01-06", None, None, None, 5.0, None)]), tmp_path / "bars.csv")
    parquet = tmp_path / "bars-dates.parquet"
    pl.DataFrame(
        {"symbol": ["B"], "ts": [datetime(2025, 1, 6).date()], "close": [6.0]}
    ).write_parquet(parquet)
    today = _write(
        _frame([("C", "2025-06-01", None, None, None, 7.0, None)]), tmp_path / "bars-today.csv"
    )
    report = _ingest(engine, [csv, parquet, today], now=datetime(2025, 6, 1, 12, tzinfo=UTC))
    end_of_day = np.datetime64("2025-01-06T23:59:59.999999", "us")
    prices = LedgerPrices(engine).for_symbols(["A", "B", "C"])
    for symbol in ("A", "B"):
        series = prices.series(symbol)
        assert series is not None
        assert series.timestamps.tolist() == [end_of_day.item()]
    # today's daily bar has not closed at noon: it would be a look into the future
    assert prices.series("C") is None
    assert dict(report.quarantine_reasons) == {"bar_in_future": 1}


def test_ledger_prices_reads_a_batch_of_symbols_with_one_statement(
    engine: sa.Engine, tmp_path: Path
) -> None:
    n = 1500  # more than SQLite's historical 999 bound parameters
    symbols = [f"SYM{i:04d}" for i in range(n)]
    frame = pl.DataFrame(
        {
            "symbol": np.repeat(symbols, 3),
            "ts": np.tile(["2025-01-02", "2025-01-03", "2025-01-06"], n),
            "close": np.arange(1, 3 * n + 1, dtype=np.float64),
        }
    )
    _ingest(engine, [_write(frame, tmp_path / "bars.parquet")])
    statements: list[str] = []

    def count(*args: object) -> None:
        statements.append(str(args[2]))

    provider = LedgerPrices(engine)
    sa.event.listen(engine, "before_cursor_execute", count)
    try:
        prices = provider.for_symbols([*symbols, "UNKNOWN"])
        assert len(statements) == 1
        assert "market_bars" in statements[0]
        newest = provider.newest()
        assert len(statements) == 2
        assert provider.for_symbols([]).symbols == ()
        assert len(statements) == 2
    finally:
        sa.event.remove(engine, "before_cursor_execute", count)
    assert prices.symbols == tuple(symbols)
    last = prices.series(symbols[-1])
    assert last is not None
    assert last.closes.tolist() == [3 * n - 2.0, 3 * n - 1.0, 3.0 * n]
    assert newest == datetime(2025, 1, 6, 23, 59, 59, 999999, tzinfo=UTC)


def test_an_empty_ledger_has_no_newest_bar(engine: sa.Engine) -> None:
    assert LedgerPrices(engine).newest() is None
    assert LedgerPrices(engine).for_symbols(["AAPL"]).symbols == ()


def test_dfull_through_ingest_reads_back_as_dfull_prices(engine: sa.Engine, tmp_path: Path) -> None:
    path = write_dfull_bars(tmp_path)
    report = _ingest(engine, [path], kinds=["bars"], now=datetime.now(UTC))
    assert report.total_quarantined == 0
    reference = dfull_prices()
    with engine.connect() as conn:
        got = LedgerPrices(conn).for_symbols(reference.symbols)
    assert got.symbols == reference.symbols
    for symbol in reference.symbols:
        want, have = reference.series(symbol), got.series(symbol)
        assert want is not None
        assert have is not None
        np.testing.assert_array_equal(have.timestamps, want.timestamps)
        np.testing.assert_array_equal(have.closes, want.closes)
        assert have.bars_per_day == want.bars_per_day
    assert LedgerPrices(engine).newest() == reference.newest()


def test_dfull_daily_through_ingest_is_every_daily_file_and_the_panel(
    engine: sa.Engine, tmp_path: Path
) -> None:
    """The demo's market data: each symbol's daily CSV as stored bars; the panel, the same."""
    report = _ingest(engine, [write_dfull_bars(tmp_path, daily=True)], kinds=["bars"], now=NOW)
    assert report.total_quarantined == 0
    files = sorted((default_dfull_root() / "prices_daily").glob("*.csv"))
    with engine.connect() as conn:
        got = LedgerPrices(conn).for_symbols(p.stem for p in files)
    assert set(got.symbols) == {p.stem for p in files}
    for path in files:
        want, have = read_daily_csv(path), got.series(path.stem)
        assert have is not None
        np.testing.assert_array_equal(have.timestamps, want.timestamps)
        np.testing.assert_array_equal(have.closes, want.closes)
    panel = daily_panel()
    assert "SPY" not in panel.tickers
    assert len(panel.tickers) == len(files) - 1
    for column, symbol in enumerate(panel.tickers):
        have = got.series(symbol)
        assert have is not None
        np.testing.assert_array_equal(panel.timestamps, have.timestamps)
        np.testing.assert_array_equal(panel.closes[:, column], have.closes)


def test_the_cli_prints_quarantined_counts_and_exits_2_on_a_parse_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from apps.cli import app

    monkeypatch.setenv("REFLEX_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("REFLEX_DATABASE_URL", raising=False)
    path = _write(
        _frame([*STORED, ("S1", "2025-01-07T15:00:00Z", 1.0, 1.0, 2.0, 1.0, 1.0)]),
        tmp_path / "prices.csv",
    )
    unmigrated = CliRunner().invoke(app, ["ingest", "--kind", "bars", str(path)])
    assert unmigrated.exit_code == 2
    assert "run `reflexmem db upgrade`" in unmigrated.output
    assert CliRunner().invoke(app, ["db", "upgrade"]).exit_code == 0
    result = CliRunner().invoke(app, ["ingest", "--kind", "bars", str(path)])
    assert result.exit_code == 0, result.output
    assert "bars: 3 new rows, 0 already stored, 1 quarantined" in result.output
    assert "bar_high_below_low 1" in result.output
    broken = tmp_path / "bars-broken.csv"
    broken.write_text("symbol,ts,close\nA,2025-01-02,abc\n")
    result = CliRunner().invoke(app, ["ingest", str(broken)])
    assert result.exit_code == 2
    assert "row 1, column 'close': cannot parse 'abc' as float" in result.output
