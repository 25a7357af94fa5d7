"""Columnar bulk reads: a SELECT's rows as an all-text polars frame, without per-row objects.

`reflexmem.ledger.bulk.read_frame` on SQLite fetched through SQLAlchemy (a `Row` object
per row) and built the frame row by row; at 1e5 rows that cost more than the query on
the cycle's larger reads (reflection inputs, the episode stream, evaluation candidates).
Here SQLite is read through the driver's own cursor (plain tuples, made in C), the rows
are transposed into columns in one `zip`, and each column becomes one polars Series
of its one Python type, then text. A column whose values mix types (SQLite is dynamically
typed: an integer and a real, a number and a string) is rare and goes through the row
frame `bulk.read_frame` builds, so its text is exactly what that function gives (a test
compares the two); PostgreSQL keeps its COPY TO path, which is columnar already.
"""

from __future__ import annotations

from typing import Any

import polars as pl
import sqlalchemy as sa

from reflexmem.ledger.bulk import read_frame as _copy_read


def read_frame(conn: sa.Connection, sql: str) -> pl.DataFrame:
    """Run a SELECT (no bind parameters) and return its rows as an all-text frame."""
    if conn.dialect.name == "postgresql":
        return _copy_read(conn, sql)
    raw: Any = conn.connection.driver_connection
    cur = raw.cursor()
    try:
        cur.execute(sql)
        names = [d[0] for d in cur.description]
        rows = cur.fetchall()
    finally:
        cur.close()
    if not rows:
        return pl.DataFrame(schema=dict.fromkeys(names, pl.String))
    columns = zip(*rows, strict=True)
    return pl.DataFrame([_text(name, values) for name, values in zip(names, columns, strict=True)])


def _text(name: str, values: tuple[Any, ...]) -> pl.Series:
    """One column as text: typed in one pass, or through the row frame if types mix."""
    try:
        typed = pl.Series(name, values, strict=True)
    except (TypeError, OverflowError, pl.exceptions.PolarsError):
        typed = pl.DataFrame(
            [(v,) for v in values], schema=[name], orient="row", infer_schema_length=None
        ).to_series()
    return typed.cast(pl.String)
