"""Bulk loads that bypass the ORM: COPY on PostgreSQL, one `executemany` on SQLite.

Row-by-row ORM inserts cost tens of microseconds a row; a million-row batch must cost
what the database's own bulk path costs. The loads run on the caller's connection, so
they join the caller's transaction and roll back with it.
"""

from __future__ import annotations

import io
from typing import Any

import polars as pl
import sqlalchemy as sa

COPY_CHUNK_ROWS = 200_000
SQLITE_TS_FORMAT = "%Y-%m-%d %H:%M:%S%.6f"


def _sqlite_ready(frame: pl.DataFrame) -> pl.DataFrame:
    """Timestamps as SQLAlchemy's SQLite text format (UTC, naive), booleans as 0/1."""
    exprs: list[pl.Expr] = []
    for name, dtype in frame.schema.items():
        col = pl.col(name)
        if isinstance(dtype, pl.Datetime):
            if dtype.time_zone is not None:
                col = col.dt.convert_time_zone("UTC").dt.replace_time_zone(None)
            exprs.append(col.dt.strftime(SQLITE_TS_FORMAT))
        elif dtype == pl.Boolean:
            exprs.append(col.cast(pl.Int8))
        else:
            exprs.append(col)
    return frame.select(exprs)


def _pg_ready(frame: pl.DataFrame) -> pl.DataFrame:
    exprs: list[pl.Expr] = []
    for name, dtype in frame.schema.items():
        if isinstance(dtype, pl.Datetime) and dtype.time_zone is None:
            exprs.append(pl.col(name).dt.replace_time_zone("UTC"))
        else:
            exprs.append(pl.col(name))
    return frame.select(exprs)


def quote_ident(conn: sa.Connection, name: str) -> str:
    """Quote a table or column name for the connection's dialect."""
    return conn.dialect.identifier_preparer.quote(name)


def bulk_insert(conn: sa.Connection, table: str, frame: pl.DataFrame) -> int:
    """Append every row of `frame` to `table` (columns by name); returns the row count."""
    if frame.height == 0:
        return 0
    cols = ", ".join(quote_ident(conn, c) for c in frame.columns)
    target = quote_ident(conn, table)
    raw: Any = conn.connection.driver_connection
    if conn.dialect.name == "postgresql":
        ready = _pg_ready(frame)
        statement = f"COPY {target} ({cols}) FROM STDIN (FORMAT csv)"
        with raw.cursor() as cur, cur.copy(statement) as copy:
            for start in range(0, ready.height, COPY_CHUNK_ROWS):
                buf = io.BytesIO()
                ready.slice(start, COPY_CHUNK_ROWS).write_csv(
                    buf, include_header=False, null_value=""
                )
                copy.write(buf.getvalue())
        return frame.height
    marks = ", ".join("?" for _ in frame.columns)
    cur = raw.cursor()
    try:
        cur.executemany(
            f"INSERT INTO {target} ({cols}) VALUES ({marks})", _sqlite_ready(frame).iter_rows()
        )
    finally:
        cur.close()
    return frame.height


def read_frame(conn: sa.Connection, sql: str) -> pl.DataFrame:
    """Run a SELECT and return its rows as an all-text polars frame (callers cast).

    Text is the one representation both backends produce losslessly in bulk: COPY TO
    on PostgreSQL, which is several times faster than fetching tuples, and the cursor
    on SQLite.
    """
    if conn.dialect.name == "postgresql":
        raw: Any = conn.connection.driver_connection
        buf = io.BytesIO()
        with raw.cursor() as cur, cur.copy(f"COPY ({sql}) TO STDOUT (FORMAT csv, HEADER)") as copy:
            for chunk in copy:
                buf.write(chunk)
        buf.seek(0)
        return pl.read_csv(buf, infer_schema=False)
    result = conn.execute(sa.text(sql))
    names = list(result.keys())
    rows = result.fetchall()
    if not rows:
        return pl.DataFrame(schema=dict.fromkeys(names, pl.String))
    frame = pl.DataFrame(rows, schema=names, orient="row", infer_schema_length=None)
    return frame.select(pl.all().cast(pl.String))
