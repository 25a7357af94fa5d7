"""The honest floor of `bench admission`: the same files into unindexed tables.

`floor_s` is what the database's plainest bulk path costs for the same Parquet files
into tables with the same columns and types but no primary key, foreign key, index,
check or trigger (created with `CREATE TABLE ... AS SELECT ... WHERE 1 = 0`, which
copies columns and types and nothing else). Every candidate path is timed and the
fastest is the floor: psycopg `COPY FROM STDIN` (CSV) and ADBC's Arrow ingest (binary
COPY) on PostgreSQL, one `executemany` transaction and ADBC's Arrow ingest on SQLite.
Each candidate starts from empty tables, reads the files itself and commits.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.parquet as pq
import sqlalchemy as sa

from apps.bench.rss import PeakRss
from reflexmem.ingest.schemas import LOAD_ORDER, SCHEMAS
from reflexmem.ledger.bulk import SQLITE_TS_FORMAT

FLOOR_PREFIX = "floor_"
BATCH_ROWS = 200_000


def _columns(directory: Path, kind: str) -> list[str]:
    return list(pq.read_schema(directory / f"{kind}.parquet").names)


def create_floor_tables(engine: sa.Engine, directory: Path) -> None:
    """Unconstrained copies of the ledger tables' columns, one per file kind."""
    with engine.begin() as conn:
        for kind in LOAD_ORDER:
            table = SCHEMAS[kind].table
            cols = ", ".join(f'"{c}"' for c in _columns(directory, kind))
            conn.execute(sa.text(f'DROP TABLE IF EXISTS "{FLOOR_PREFIX}{table}"'))
            conn.execute(
                sa.text(
                    f'CREATE TABLE "{FLOOR_PREFIX}{table}" AS SELECT {cols} FROM "{table}" '
                    "WHERE 1 = 0"
                )
            )


def _empty(engine: sa.Engine) -> None:
    with engine.begin() as conn:
        for kind in LOAD_ORDER:
            conn.execute(sa.text(f'DELETE FROM "{FLOOR_PREFIX}{SCHEMAS[kind].table}"'))


def _batches(directory: Path, kind: str) -> Any:
    return pq.ParquetFile(directory / f"{kind}.parquet").iter_batches(batch_size=BATCH_ROWS)


def _pg_copy(engine: sa.Engine, directory: Path) -> None:
    raw: Any = engine.raw_connection()
    try:
        with raw.driver_connection.cursor() as cur:
            for kind in LOAD_ORDER:
                table = FLOOR_PREFIX + SCHEMAS[kind].table
                cols = ", ".join(f'"{c}"' for c in _columns(directory, kind))
                with cur.copy(f'COPY "{table}" ({cols}) FROM STDIN (FORMAT csv)') as copy:
                    for batch in _batches(directory, kind):
                        buf = io.BytesIO()
                        frame = pl.from_arrow(batch)
                        assert isinstance(frame, pl.DataFrame)
                        frame.write_csv(buf, include_header=False, null_value="")
                        copy.write(buf.getvalue())
        raw.commit()
    finally:
        raw.close()


def _sqlite_executemany(engine: sa.Engine, directory: Path) -> None:
    raw: Any = engine.raw_connection()
    try:
        cur = raw.driver_connection.cursor()
        for kind in LOAD_ORDER:
            table = FLOOR_PREFIX + SCHEMAS[kind].table
            cols = _columns(directory, kind)
            marks = ", ".join("?" for _ in cols)
            sql = f'INSERT INTO "{table}" ({", ".join(cols)}) VALUES ({marks})'
            for batch in _batches(directory, kind):
                frame = pl.from_arrow(batch)
                assert isinstance(frame, pl.DataFrame)
                ready = frame.with_columns(
                    pl.col(pl.Datetime).dt.strftime(SQLITE_TS_FORMAT),
                    pl.col(pl.Boolean).cast(pl.Int8),
                )
                cur.executemany(sql, ready.iter_rows())
        raw.driver_connection.commit()
    finally:
        raw.close()


def _int32_columns(engine: sa.Engine, table: str) -> set[str]:
    """Columns declared INTEGER: binary COPY needs 4-byte values for them."""
    columns = sa.inspect(engine).get_columns(table)
    return {c["name"] for c in columns if type(c["type"]) is sa.INTEGER}


def _adbc(engine: sa.Engine, directory: Path) -> None:
    import pyarrow as pa

    url = engine.url
    if url.get_backend_name() == "postgresql":
        import adbc_driver_postgresql.dbapi as pg

        uri = url.set(drivername="postgresql").render_as_string(hide_password=False)
        conn: Any = pg.connect(uri)
    else:
        import adbc_driver_sqlite.dbapi as lite

        conn = lite.connect(str(url.database))
    try:
        with conn.cursor() as cur:
            for kind in LOAD_ORDER:
                table = FLOOR_PREFIX + SCHEMAS[kind].table
                narrow = (
                    _int32_columns(engine, table) if url.get_backend_name() != "sqlite" else set()
                )
                for batch in _batches(directory, kind):
                    if narrow:
                        schema = pa.schema(
                            [
                                f.with_type(pa.int32()) if f.name in narrow else f
                                for f in batch.schema
                            ]
                        )
                        batch = batch.cast(schema)
                    cur.adbc_ingest(table, batch, mode="append")
        conn.commit()
    finally:
        conn.close()


def _count(engine: sa.Engine) -> int:
    with engine.connect() as conn:
        return sum(
            int(conn.execute(sa.text(f'SELECT COUNT(*) FROM "{FLOOR_PREFIX}{t}"')).scalar_one())
            for t in (SCHEMAS[k].table for k in LOAD_ORDER)
        )


def measure_floor(engine: sa.Engine, directory: Path) -> dict[str, Any]:
    """Time every candidate bulk path; the fastest one is `floor_s`."""
    create_floor_tables(engine, directory)
    candidates: dict[str, Callable[[sa.Engine, Path], None]]
    if engine.dialect.name == "postgresql":
        candidates = {"psycopg_copy_csv": _pg_copy, "adbc_ingest": _adbc}
    else:
        candidates = {"sqlite_executemany": _sqlite_executemany, "adbc_ingest": _adbc}
    seconds: dict[str, float] = {}
    errors: dict[str, str] = {}
    rows = 0
    rss = PeakRss()
    with rss:
        for name, load in candidates.items():
            _empty(engine)
            start = time.perf_counter()
            try:
                load(engine, directory)
            except Exception as exc:
                errors[name] = f"{type(exc).__name__}: {exc}"[:300]
                continue
            seconds[name] = round(time.perf_counter() - start, 3)
            rows = _count(engine)
    best = min(seconds, key=lambda k: seconds[k])
    return {
        "floor_s": seconds[best],
        "floor_path": best,
        "floor_paths_s": seconds,
        "floor_errors": errors,
        "floor_rows": rows,
        "floor_peak_rss_mb": rss.peak_mb,
    }
