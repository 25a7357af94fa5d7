"""Set-based ledger I/O shared by maturation, evaluation and reflection.

Updates of many rows go through a staging temp table filled by `bulk_insert` (COPY on
PostgreSQL) and one `UPDATE ... FROM`, because one UPDATE statement per row is exactly
the row-by-row loop batch work must never be. Text read back by `read_frame` is parsed
here once, for both backends' timestamp spellings.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

import polars as pl
import sqlalchemy as sa

from reflexmem.ledger.bulk import bulk_insert, quote_ident

UTC_US = pl.Datetime("us", "UTC")


def to_utc(value: datetime) -> datetime:
    """An aware UTC datetime; a naive value is UTC (the ledger's convention).

    SQLite hands back the stamps it stored without their zone.
    """
    return value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)


def parse_utc(col: pl.Expr) -> pl.Expr:
    """Parse SQLite (`2025-01-06 14:30:00.000000`) or PostgreSQL (`...+00`) text as UTC."""
    text = (
        col.str.strip_chars()
        .str.replace("T", " ")
        .str.replace(r"Z$", "+00:00")
        .str.replace(r"([+-]\d{2})$", "${1}:00")
    )
    return pl.coalesce(
        text.str.to_datetime("%Y-%m-%d %H:%M:%S%.f%:z", strict=False, time_zone="UTC"),
        text.str.to_datetime("%Y-%m-%d %H:%M:%S%:z", strict=False, time_zone="UTC"),
        text.str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False).dt.replace_time_zone("UTC"),
        text.str.to_datetime("%Y-%m-%d %H:%M:%S", strict=False).dt.replace_time_zone("UTC"),
    ).dt.cast_time_unit("us")


def parse_bool(col: pl.Expr) -> pl.Expr:
    """Booleans as read back from either backend (`1`/`0` or `t`/`f`)."""
    return col.str.to_lowercase().is_in(["1", "t", "true"])


def _sql_type(dtype: pl.DataType, dialect: str) -> str:
    pg = dialect == "postgresql"
    if isinstance(dtype, pl.Datetime):
        return "TIMESTAMPTZ" if pg else "TEXT"
    if dtype == pl.Boolean:
        return "BOOLEAN" if pg else "INTEGER"
    if dtype.is_integer():
        return "BIGINT" if pg else "INTEGER"
    if dtype.is_float():
        return "DOUBLE PRECISION" if pg else "REAL"
    return "TEXT"


def stage(conn: sa.Connection, name: str, frame: pl.DataFrame) -> str:
    """Create (or recreate) a temp table shaped like `frame` and load it; returns its name."""
    q = quote_ident(conn, name)
    dialect = conn.dialect.name
    cols = ", ".join(
        f"{quote_ident(conn, c)} {_sql_type(t, dialect)}" for c, t in frame.schema.items()
    )
    conn.execute(sa.text(f"DROP TABLE IF EXISTS {q}"))
    suffix = " ON COMMIT DROP" if dialect == "postgresql" else ""
    conn.execute(sa.text(f"CREATE TEMP TABLE {q} ({cols}){suffix}"))
    bulk_insert(conn, name, frame)
    return name


def drop_stage(conn: sa.Connection, name: str) -> None:
    """Drop a staging table now (SQLite keeps temp tables for the connection's life)."""
    conn.execute(sa.text(f"DROP TABLE IF EXISTS {quote_ident(conn, name)}"))


def bulk_update(
    conn: sa.Connection,
    table: str,
    key: str,
    frame: pl.DataFrame,
    *,
    json_columns: Iterable[str] = (),
) -> int:
    """Set every non-key column of `frame` on the rows of `table` matched by `key`."""
    if frame.height == 0:
        return 0
    name = stage(conn, f"_stage_{table}", frame)
    json_set = set(json_columns)
    pg = conn.dialect.name == "postgresql"
    sets = []
    for col in frame.columns:
        if col == key:
            continue
        src = f"s.{quote_ident(conn, col)}"
        if pg and col in json_set:
            src = f"CAST({src} AS JSON)"
        sets.append(f"{quote_ident(conn, col)} = {src}")
    t = quote_ident(conn, table)
    k = quote_ident(conn, key)
    result = conn.execute(
        sa.text(
            f"UPDATE {t} SET {', '.join(sets)} FROM {quote_ident(conn, name)} s "
            f"WHERE {t}.{k} = s.{k}"
        )
    )
    drop_stage(conn, name)
    return int(result.rowcount or 0)


@contextmanager
def postgres_settings(conn: sa.Connection, **settings: str) -> Iterator[None]:
    """PostgreSQL settings for the statements inside only (`SET LOCAL`, then `RESET`).

    A no-op on SQLite. On an error nothing is reset: the transaction is aborted, and its
    rollback ends every `SET LOCAL` with it.
    """
    pg = conn.dialect.name == "postgresql"
    for name, value in settings.items() if pg else ():
        conn.execute(sa.text(f"SET LOCAL {name} = '{value}'"))
    yield
    for name in settings if pg else ():
        conn.execute(sa.text(f"RESET {name}"))
