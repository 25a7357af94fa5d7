"""Refuse staged rows that contradict what the ledger already stores under the same key.

Both sides are read back from the database with the ledger table's own column types
(the staging table has exactly those columns), so a file's row is compared as it would
be stored: the same value given as Parquet, CSV or JSONL compares equal, and a value
the database would store differently is a conflict. Matches are read in keyset chunks
of staged rows, so memory stays bounded however many rows a re-ingest repeats.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import sqlalchemy as sa

from reflexmem.ingest.read import ROW, IngestError
from reflexmem.ingest.schemas import FileSchema
from reflexmem.ledger.models import Base

DTYPES: dict[str, pl.DataType] = {
    "str": pl.String(),
    "json": pl.String(),
    "float": pl.Float64(),
    "int": pl.Int64(),
    "bool": pl.Boolean(),
    "timestamp": pl.Datetime("us", "UTC"),
}
STORED = "__stored"


def table_columns(schema: FileSchema) -> list[str]:
    """The ledger table's columns a file of `schema` fills."""
    cols = [c.name for c in schema.columns]
    if schema.kind == "previews":
        cols.append("consume_count")
    return cols


def _polars_schema(schema: FileSchema) -> dict[str, pl.DataType]:
    out = {c.name: DTYPES[c.type] for c in schema.columns}
    if schema.kind == "previews":
        out["consume_count"] = pl.Int64()
    return out


def _canonical_json(text: str | None) -> str | None:
    return None if text is None else json.dumps(json.loads(text), sort_keys=True)


def _normalise(frame: pl.DataFrame, json_cols: list[str]) -> pl.DataFrame:
    exprs = []
    for name, dtype in frame.schema.items():
        if name in json_cols:
            exprs.append(pl.col(name).map_elements(_canonical_json, return_dtype=pl.String))
        elif isinstance(dtype, pl.Datetime):
            exprs.append(pl.col(name).dt.timestamp("us").cast(pl.String))
        elif dtype in (pl.Float64, pl.Float32):
            exprs.append(pl.col(name).round(9).cast(pl.String))
        else:
            exprs.append(pl.col(name).cast(pl.String))
    return frame.select(exprs)


def _frame(rows: list[tuple[object, ...]], schema: dict[str, pl.DataType]) -> pl.DataFrame:
    frame = pl.DataFrame(rows, schema=schema, orient="row", strict=False)
    return frame.with_columns(
        [
            pl.col(n).dt.replace_time_zone("UTC")
            for n, t in frame.schema.items()
            if isinstance(t, pl.Datetime) and t.time_zone is None
        ]
    )


def _first_conflict(
    path: Path, schema: FileSchema, rows: list[tuple[Any, ...]]
) -> IngestError | None:
    keys = list(schema.key_columns)
    cols = table_columns(schema)
    types = _polars_schema(schema)
    json_cols = [c.name for c in schema.columns if c.type == "json"]
    n = len(cols)
    incoming = _frame([tuple(r[:n]) for r in rows], types)
    stored = _frame([tuple(r[n + 1 :]) for r in rows], types)
    a = _normalise(incoming, json_cols).with_columns(pl.Series(ROW, [r[n] for r in rows]))
    b = _normalise(stored, json_cols).rename({c: c + STORED for c in cols if c not in keys})
    joined = pl.concat([a, b.drop(keys)], how="horizontal")
    for c in cols:
        if c in keys:
            continue
        differs = joined.filter(pl.col(c).ne_missing(pl.col(c + STORED)))
        if differs.height:
            row = differs.sort(ROW).row(0, named=True)
            key = row[keys[0]] if len(keys) == 1 else tuple(row[k] for k in keys)
            return IngestError(
                path,
                f"key {key!r} is already stored with {c}={row[c + STORED]!r}, "
                f"this file says {row[c]!r}",
                row=int(row[ROW]),
                column=c,
            )
    return None


def check_conflicts(
    conn: sa.Connection, path: Path, schema: FileSchema, stage: str, *, chunk_rows: int
) -> int:
    """How many staged rows are already stored (identically); raises on the first conflict."""
    keys = list(schema.key_columns)
    cols = table_columns(schema)
    table = Base.metadata.tables[schema.table]
    staged = sa.table(
        stage, *[sa.column(c, table.c[c].type) for c in cols], sa.column(ROW, sa.Integer())
    )
    json_cols = {c.name for c in schema.columns if c.type == "json"}

    def picked(t: sa.TableClause | sa.Table) -> list[sa.ColumnElement[object]]:
        return [sa.cast(t.c[c], sa.Text) if c in json_cols else t.c[c] for c in cols]

    same = sa.and_(*[staged.c[k] == table.c[k] for k in keys])
    total = 0
    after = 0
    while True:
        query = (
            sa.select(*picked(staged), staged.c[ROW], *picked(table))
            .join(table, same)
            .where(staged.c[ROW] > after)
            .order_by(staged.c[ROW])
            .limit(chunk_rows)
        )
        rows: list[tuple[Any, ...]] = [tuple(r) for r in conn.execute(query)]
        if not rows:
            return total
        error = _first_conflict(path, schema, rows)
        if error is not None:
            raise error
        total += len(rows)
        after = int(rows[-1][len(cols)])
        if len(rows) < chunk_rows:
            return total
