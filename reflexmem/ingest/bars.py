"""Load one market-bars file: what cannot be parsed fails the file, bad bars are quarantined.

Prices come from many vendors and one bad print must not block a year of good bars, so a
bars file, once parsed, is judged bar by bar by an injected validator (the Great
Expectations suite `expectations/bars.json`; the core never imports it). Everything the
suite needs that is not in the row itself is computed here, set-based: each bar's
previous stamp for the same symbol in file order (polars), and the bar already stored
under the same (symbol, ts) (one join against a staged copy of the file's keys). Bars
that fail go to `quarantine` with every expectation they failed; bars identical to the
stored ones are counted unchanged; the rest are bulk-loaded (COPY on PostgreSQL).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

import polars as pl
import sqlalchemy as sa

from reflexmem.ingest.read import ROW, LedgerFile
from reflexmem.ledger.bulk import bulk_insert, quote_ident, read_frame
from reflexmem.ledger.enums import QuarantineReason, SubjectKind

BarValidator = Callable[[pl.DataFrame, datetime], pl.DataFrame]
"""(one file's prepared bars, the ingest's `now`) -> failures: one row per failed
expectation of a bar, columns `_row` (Int64) and `expectation` (its `meta.name`).

The prepared frame has `_row`, the bar columns (`symbol`, `ts`, `open`, `high`, `low`,
`close`, `volume`), `prev_ts` (the previous bar of the symbol in file order, null for
the first), `stored_close` and `stored_fields` (the stored bar under the same key, null
when there is none) and `fields` (open/high/low/volume as one comparable text)."""

BAR_COLUMNS = ("symbol", "ts", "open", "high", "low", "close", "volume")
FIELDS = ("open", "high", "low", "volume")
BAR_REASONS = tuple(r.value for r in QuarantineReason if r.value.startswith("bar_"))
"""Reason codes of bars in priority order: a quarantined bar's code is its first failure."""
STAGE = "stage_bar_keys"


@dataclass
class BarLoad:
    """What one bars file did to the ledger."""

    added: int = 0
    unchanged: int = 0
    quarantined: int = 0
    by_reason: dict[str, int] = field(default_factory=dict)


def _fingerprint(prefix: str) -> pl.Expr:
    parts = [pl.col(f"{prefix}{c}").cast(pl.String).fill_null("") for c in FIELDS]
    return pl.concat_str(parts, separator="|")


def stored_bars(conn: sa.Connection, frame: pl.DataFrame) -> pl.DataFrame:
    """Per row of `frame` whose (symbol, ts) is stored: `_row` and the stored values."""
    q = quote_ident(conn, STAGE)
    conn.execute(sa.text(f"DROP TABLE IF EXISTS {q}"))
    conn.execute(
        sa.text(f"CREATE TEMPORARY TABLE {q} AS SELECT symbol, ts FROM market_bars WHERE 1 = 0")
    )
    conn.execute(sa.text(f"ALTER TABLE {q} ADD COLUMN {ROW} INTEGER"))
    bulk_insert(conn, STAGE, frame.select("symbol", "ts", ROW))
    if conn.dialect.name == "postgresql":
        conn.execute(sa.text(f"ANALYZE {q}"))
    raw = read_frame(
        conn,
        f"SELECT s.{ROW}, t.open, t.high, t.low, t.close, t.volume FROM {q} s "
        "JOIN market_bars t ON t.symbol = s.symbol AND t.ts = s.ts",
    )
    conn.execute(sa.text(f"DROP TABLE {q}"))
    return raw.select(
        pl.col(ROW).cast(pl.Int64),
        *[pl.col(c).cast(pl.Float64).alias(f"stored_{c}") for c in (*FIELDS, "close")],
    )


def prepare_bars(frame: pl.DataFrame, stored: pl.DataFrame) -> pl.DataFrame:
    """The frame the validator judges (see `BarValidator`)."""
    joined = frame.with_columns(pl.col("ts").shift(1).over("symbol").alias("prev_ts")).join(
        stored, on=ROW, how="left"
    )
    has_stored = pl.col("stored_close").is_not_null()
    return joined.select(
        ROW,
        *BAR_COLUMNS,
        "prev_ts",
        "stored_close",
        _fingerprint("").alias("fields"),
        pl.when(has_stored).then(_fingerprint("stored_")).alias("stored_fields"),
    )


def _verdicts(prepared: pl.DataFrame, failures: pl.DataFrame) -> pl.DataFrame:
    """One row per failing bar: `_row`, primary `reason_code`, all `failed_expectations`."""
    missing = {ROW, "expectation"} - set(failures.columns)
    if missing:
        raise ValueError(f"the bar validator's failures lack {sorted(missing)}")
    failures = failures.select(pl.col(ROW).cast(pl.Int64), pl.col("expectation").cast(pl.String))
    unknown = set(failures["expectation"].unique().to_list()) - set(BAR_REASONS)
    if unknown:
        raise ValueError(f"the bar validator reports expectations with no reason code: {unknown}")
    stray = failures.join(prepared.select(ROW), on=ROW, how="anti")
    if stray.height:
        raise ValueError(f"the bar validator names rows that are not in the file: {stray.head(3)}")
    rank = pl.col("expectation").replace_strict(BAR_REASONS, list(range(len(BAR_REASONS))))
    return (
        failures.unique()
        .with_columns(rank.alias("_rank"))
        .sort(ROW, "_rank")
        .group_by(ROW, maintain_order=True)
        .agg(
            pl.col("expectation").first().alias("reason_code"),
            pl.col("expectation").sort().str.join(",").alias("failed_expectations"),
        )
    )


def _text(name: str) -> pl.Expr:
    return pl.col(name).cast(pl.String).fill_null("-")


def _quarantine_rows(
    prepared: pl.DataFrame, verdicts: pl.DataFrame, *, sha256: str, now: datetime
) -> pl.DataFrame:
    stamp = "%Y-%m-%dT%H:%M:%S%.6f%:z"
    rows = verdicts.join(prepared, on=ROW, how="left")
    detail = pl.format(
        "symbol={} ts={} open={} high={} low={} close={} volume={} previous_ts={} stored_close={}",
        _text("symbol"),
        pl.col("ts").dt.strftime(stamp).fill_null("-"),
        *[_text(c) for c in ("open", "high", "low", "close", "volume")],
        pl.col("prev_ts").dt.strftime(stamp).fill_null("-"),
        _text("stored_close"),
    )
    return rows.select(
        pl.lit(SubjectKind.BAR.value).alias("subject_kind"),
        pl.format("bar:{}:{}", pl.lit(sha256[:12]), pl.col(ROW)).alias("subject_id"),
        pl.lit(None, dtype=pl.String).alias("decision_id"),
        pl.lit(None, dtype=pl.String).alias("role_id"),
        "reason_code",
        "failed_expectations",
        detail.alias("detail"),
        pl.lit(sha256).alias("batch_id"),
        pl.lit(now).dt.convert_time_zone("UTC").alias("created_at"),
    )


def load_bars(
    conn: sa.Connection, file: LedgerFile, validate: BarValidator, *, now: datetime
) -> BarLoad:
    """Judge every bar of `file`, quarantine the failures, append the new passing bars."""
    frame = file.frame
    prepared = prepare_bars(frame, stored_bars(conn, frame))
    verdicts = _verdicts(prepared, validate(prepared, now))
    if verdicts.height:
        bulk_insert(
            conn, "quarantine", _quarantine_rows(prepared, verdicts, sha256=file.sha256, now=now)
        )
    passing = prepared.join(verdicts.select(ROW), on=ROW, how="anti")
    new = passing.filter(pl.col("stored_close").is_null())
    bulk_insert(
        conn,
        "market_bars",
        new.select(
            *BAR_COLUMNS,
            pl.lit(file.sha256).alias("source_sha256"),
            pl.lit(now).dt.convert_time_zone("UTC").alias("ingested_at"),
        ),
    )
    counts = verdicts.group_by("reason_code").len()
    return BarLoad(
        added=new.height,
        unchanged=passing.height - new.height,
        quarantined=verdicts.height,
        by_reason={str(r): int(n) for r, n in counts.iter_rows()},
    )
