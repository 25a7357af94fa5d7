"""The bars validator the core's `ingest_files(validate_bars=...)` expects.

It runs the suite `bars.json` through the same machinery as admission (`runner.validate_rows`:
an ephemeral context, COMPLETE results keyed by the `_row` column, a result that cannot
account for every unexpected row raises). Uniqueness of (symbol, ts) is not a row-wise
check, so the admission runner's one-validation-per-distinct-profile shortcut does not
apply; instead a large file is validated in chunks of about `CHUNK_ROWS` bars so that
the pandas copy Great Expectations works on stays bounded. Chunks are cut by a hash of
(symbol, ts): every copy of a key lands in the same chunk, so the uniqueness check sees
the whole file's duplicates, and every other expectation reads only its own row
(`prev_ts` and the stored bar are computed by the core before validation).
"""

from __future__ import annotations

from datetime import UTC, datetime

import polars as pl

from expectations.runner import validate_rows
from reflexmem.ingest.read import ROW

SUITE = "bars"
CHUNK_ROWS = 200_000
PRICES = ("open", "high", "low", "close", "volume")
STAMPS = ("ts", "prev_ts")
COLUMNS = (ROW, "symbol", "ts", "prev_ts", *PRICES, "stored_close", "fields", "stored_fields")


def _for_pandas(frame: pl.DataFrame) -> pl.DataFrame:
    """The columns the suite reads, shaped for pandas.

    NaN becomes +inf: pandas reads NaN as missing, which would let it pass unchecked.
    Stamps become naive UTC (and `now` with them): Great Expectations reads tz-aware
    pandas columns through a path pandas deprecates.
    """
    return frame.select(COLUMNS).with_columns(
        *[pl.col(c).fill_nan(float("inf")) for c in (*PRICES, "stored_close")],
        *[pl.col(c).dt.convert_time_zone("UTC").dt.replace_time_zone(None) for c in STAMPS],
    )


def _chunks(frame: pl.DataFrame, chunk_rows: int) -> list[pl.DataFrame]:
    n = -(-frame.height // chunk_rows)
    if n <= 1:
        return [frame]
    part = pl.struct("symbol", "ts").hash(seed=0) % n
    return frame.with_columns(part.alias("_chunk")).partition_by("_chunk", include_key=False)


def validate_bars(
    frame: pl.DataFrame, now: datetime, *, chunk_rows: int = CHUNK_ROWS
) -> pl.DataFrame:
    """Failures of prepared bars: one row per (`_row`, failed `expectation`)."""
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    naive_now = now.astimezone(UTC).replace(tzinfo=None)
    failures = [
        validate_rows(_for_pandas(chunk).to_pandas(), SUITE, {"now": naive_now}, ROW).select(
            pl.col(ROW).cast(pl.Int64), "expectation"
        )
        for chunk in _chunks(frame, chunk_rows)
    ]
    return pl.concat(failures).sort(ROW, "expectation")
