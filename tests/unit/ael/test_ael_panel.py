from __future__ import annotations

from datetime import date
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from reflexmem.ael.splits import split_by_dates
from reflexmem.prices.panel import PricePanel, default_dfull_root, load_dfull, load_panel

STAMPS = [
    "2025-03-07 15:30:00-05:00",
    "2025-03-10 09:30:00-04:00",
    "2025-03-10 11:30:00-04:00",
]


def test_dfull_loads_ten_aligned_tickers_in_paper_order(dfull: PricePanel) -> None:
    assert dfull.tickers == ("AAPL", "NVDA", "JNJ", "UNH", "JPM", "GS", "XOM", "PG", "CAT", "NEE")
    assert dfull.closes.shape == (208, 10)
    assert dfull.closes[0, 0] == pytest.approx(245.5500030517578)
    assert str(dfull.local_dates[0]) == "2025-01-06"
    assert str(dfull.local_dates[-1]) == "2025-03-21"


def test_dfull_offsets_change_the_instant_but_not_the_printed_date(dfull: PricePanel) -> None:
    before, after = 167, 168  # 2025-03-07 15:30 -05:00 and 2025-03-10 09:30 -04:00
    assert str(dfull.timestamps[before]) == "2025-03-07T20:30:00.000000"
    assert str(dfull.timestamps[after]) == "2025-03-10T13:30:00.000000"
    assert str(dfull.local_dates[after]) == "2025-03-10"


def test_default_root_resolves_from_the_package_and_can_be_overridden(tmp_path: Path) -> None:
    assert (default_dfull_root() / "README.md").is_file()
    assert default_dfull_root(tmp_path) == tmp_path / "data" / "ael-dfull"


def test_wide_csv_loads_with_tickers_from_column_names(tmp_path: Path) -> None:
    path = tmp_path / "wide.csv"
    path.write_text(
        "Timestamp,AAA,BBB\n"
        f"{STAMPS[1]},10.5,20\n"  # deliberately out of order
        f"{STAMPS[0]},10,21\n"
        f"{STAMPS[2]},11,19.5\n"
    )
    panel = load_panel(path)
    assert panel.tickers == ("AAA", "BBB")
    np.testing.assert_array_equal(panel.closes, [[10, 21], [10.5, 20], [11, 19.5]])
    assert [str(d) for d in panel.local_dates] == ["2025-03-07", "2025-03-10", "2025-03-10"]


def test_long_parquet_loads_and_pivots_by_ticker(tmp_path: Path) -> None:
    path = tmp_path / "long.parquet"
    pl.DataFrame(
        {
            "DATE": [STAMPS[0], STAMPS[0], STAMPS[1], STAMPS[1], STAMPS[2], STAMPS[2]],
            "Symbol": ["X", "Y", "Y", "X", "X", "Y"],
            "CLOSE": [1.0, 2.0, 2.2, 1.1, 1.2, 2.4],
        }
    ).write_parquet(path)
    panel = load_panel(path)
    assert panel.tickers == ("X", "Y")
    np.testing.assert_array_equal(panel.closes, [[1.0, 2.0], [1.1, 2.2], [1.2, 2.4]])


def test_long_parquet_with_tz_aware_datetimes_keeps_the_local_date(tmp_path: Path) -> None:
    path = tmp_path / "aware.parquet"
    stamps = pl.Series(["2025-02-21 15:30:00", "2025-02-24 09:30:00"]).str.to_datetime()
    local = stamps.dt.replace_time_zone("America/New_York")
    pl.DataFrame(
        {
            "timestamp": pl.concat([local, local]),
            "ticker": ["A", "A", "B", "B"],
            "close": [1.0, 1.1, 2.0, 2.1],
        }
    ).write_parquet(path)
    panel = load_panel(path)
    splits = split_by_dates(panel.local_dates, date(2025, 2, 21), date(2025, 2, 21))
    assert [str(d) for d in panel.local_dates] == ["2025-02-21", "2025-02-24"]
    assert (splits.train.n_bars, splits.test.n_bars) == (1, 1)


def test_loaded_panel_cannot_be_edited(dfull: PricePanel) -> None:
    with pytest.raises(ValueError, match="read-only"):
        dfull.closes[0, 0] = 0.0


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("when,A,B\n2025-01-01,1,2\n", "no timestamp column"),
        ("date,A,B\n2025-01-01,1,2\n2025-01-02,x,2\n", r"non-numeric close column 'A' at row 1"),
        ("date,A,B\n2025-01-01,1,2\n2025-01-01,1,2\n", "duplicate timestamps"),
        ("date,A\n2025-01-01,1\n", "fewer than 2 tickers"),
        ("date,A,B\nnot-a-date,1,2\n", "unparseable timestamps"),
        (
            "date,ticker,close\n2025-01-01,A,1\n2025-01-02,A,2\n2025-01-01,B,3\n",
            "misaligned tickers: B lacks 1 of 2 timestamps",
        ),
        ("date,ticker,close\n2025-01-01,A,1\n2025-01-01,A,2\n2025-01-01,B,3\n", "duplicate"),
    ],
)
def test_bad_csv_raises_value_error_naming_file_and_problem(
    tmp_path: Path, content: str, message: str
) -> None:
    path = tmp_path / "bad_panel.csv"
    path.write_text(content)
    with pytest.raises(ValueError, match=message) as info:
        load_panel(path)
    assert "bad_panel.csv" in str(info.value)


def test_unsupported_suffix_and_missing_file_are_value_errors(tmp_path: Path) -> None:
    odd = tmp_path / "panel.xlsx"
    odd.write_text("x")
    with pytest.raises(ValueError, match="unsupported file type"):
        load_panel(odd)
    with pytest.raises(ValueError, match="no such file"):
        load_panel(tmp_path / "absent.csv")


def test_dfull_with_a_shifted_ticker_is_rejected_as_misaligned(tmp_path: Path) -> None:
    root = tmp_path / "dfull"
    (root / "prices_1h").mkdir(parents=True)
    source = default_dfull_root() / "prices_1h"
    for name in ("AAPL.csv", "NVDA.csv"):
        lines = (source / name).read_text().splitlines(keepends=True)
        if name == "NVDA.csv":
            lines = lines[:1] + lines[2:]  # drop one bar
        (root / "prices_1h" / name).write_text("".join(lines))
    with pytest.raises(ValueError, match="misaligned tickers") as info:
        load_dfull(root)
    assert "NVDA.csv" in str(info.value)
