"""The bars suite against the reason codes, and chunked validation against one pass."""

from __future__ import annotations

from datetime import UTC, datetime

import polars as pl

from expectations.bars import validate_bars
from expectations.runner import expectation_names
from reflexmem.ingest.bars import BAR_REASONS, prepare_bars
from reflexmem.ingest.read import ROW
from reflexmem.ingest.schemas import BARS
from reflexmem.ledger.enums import QuarantineReason

NOW = datetime(2025, 6, 1, tzinfo=UTC)
BARS_FIELDS = ("open", "high", "low", "volume", "close")


def test_every_expectation_is_a_reason_code_in_priority_order() -> None:
    names = expectation_names("bars")
    assert tuple(names) == BAR_REASONS
    assert set(names) <= {r.value for r in QuarantineReason}
    assert all(len(n) <= 22 for n in names)  # the reason_code column's width


def _bars(n: int) -> pl.DataFrame:
    """n bars on 7 symbols with duplicates and out-of-order stamps spread over the file."""
    i = pl.int_range(n, eager=True)
    ts = pl.datetime(2025, 1, 1, time_zone="UTC") + pl.duration(hours=pl.lit(i // 7))
    frame = pl.DataFrame({"i": i}).select(
        (pl.col("i") + 1).cast(pl.Int64).alias(ROW),
        pl.format("S{}", pl.col("i") % 7).alias("symbol"),
        ts.alias("ts"),
        pl.lit(1.0).alias("open"),
        pl.lit(2.0).alias("high"),
        pl.lit(0.5).alias("low"),
        (pl.col("i") % 13 + 1).cast(pl.Float64).alias("close"),
        pl.lit(10.0).alias("volume"),
    )
    # a copy of an early bar near the end, and a bar that goes back in time
    dup = frame.slice(3, 1).with_columns(pl.lit(n + 1, dtype=pl.Int64).alias(ROW))
    back = frame.slice(100, 1).with_columns(
        pl.lit(n + 2, dtype=pl.Int64).alias(ROW), pl.col("ts") - pl.duration(minutes=30)
    )
    return pl.concat([frame, dup, back])


def test_chunked_validation_finds_exactly_what_one_pass_finds() -> None:
    frame = _bars(500)
    stored = pl.DataFrame(schema={ROW: pl.Int64} | {f"stored_{c}": pl.Float64 for c in BARS_FIELDS})
    prepared = prepare_bars(frame, stored)
    whole = validate_bars(prepared, NOW)
    chunked = validate_bars(prepared, NOW, chunk_rows=37)
    assert whole.height > 0
    assert chunked.equals(whole)
    dup_rows = set(whole.filter(pl.col("expectation") == "bar_duplicate")[ROW].to_list())
    assert dup_rows == {4, 501}
    back = whole.filter(pl.col("expectation") == "bar_not_increasing")[ROW].to_list()
    assert set(back) == {501, 502}


def test_the_bars_contract_has_a_composite_key_and_its_own_suite() -> None:
    assert BARS.key_columns == ("symbol", "ts")
    assert BARS.suite == "bars"
