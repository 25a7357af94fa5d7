"""Read a ledger file and coerce it to its contract, or fail naming file, row and column.

Everything here is vectorized: each column is parsed once for the whole file and only a
failed parse goes back to find the first offending row, so a valid million-row file
costs a handful of polars expressions.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from reflexmem.ingest.checks import RAW, Check, checks, first_failure, value
from reflexmem.ingest.schemas import SCHEMAS, Column, FileSchema

ROW = "_row"
TRUE_WORDS = ("true", "t", "1", "yes", "y")
FALSE_WORDS = ("false", "f", "0", "no", "n")
SUFFIXES = {
    ".csv": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
}


class IngestError(ValueError):
    """Bad input: says which file, row (1-based, data rows) and column, and why."""

    def __init__(
        self, path: Path, message: str, *, row: int | None = None, column: str | None = None
    ) -> None:
        where = [str(path)]
        if row is not None:
            where.append(f"row {row}")
        if column is not None:
            where.append(f"column {column!r}")
        super().__init__(f"{', '.join(where)}: {message}")
        self.path, self.row, self.column = path, row, column


@dataclass(frozen=True)
class LedgerFile:
    """A validated file: its kind, checksum and typed rows (with a `_row` column)."""

    path: Path
    schema: FileSchema
    sha256: str
    frame: pl.DataFrame


def detect_kind(path: Path) -> str:
    """The ledger kind from the file name: `decisions*.csv`, `fills-2025.parquet`, ..."""
    stem = path.name.lower()
    for kind in SCHEMAS:
        if stem.startswith(kind) or stem.startswith(kind.rstrip("s")):
            return kind
    raise IngestError(
        path, f"cannot tell the kind from the name; it must start with one of {', '.join(SCHEMAS)}"
    )


def read_raw(path: Path) -> pl.DataFrame:
    """The whole file as polars reads it (CSV all text), or an `IngestError`."""
    fmt = SUFFIXES.get(path.suffix.lower())
    if fmt is None:
        raise IngestError(path, f"unsupported format {path.suffix!r} (use .csv, .parquet, .jsonl)")
    try:
        if fmt == "csv":
            return pl.read_csv(path, infer_schema=False)
        if fmt == "parquet":
            return pl.read_parquet(path)
        return pl.read_ndjson(path, infer_schema_length=None)
    except (pl.exceptions.PolarsError, OSError, ValueError) as exc:
        line = first_broken_line(path) if fmt == "jsonl" else None
        if line is not None:
            raise IngestError(path, f"line {line} is not a JSON object: {exc}", row=line) from exc
        raise IngestError(path, f"cannot be read as {fmt}: {exc}") from exc


def first_broken_line(path: Path) -> int | None:
    """The 1-based number of the first non-blank line that is not a JSON object."""
    try:
        lines = pl.Series(path.read_text(encoding="utf-8").split("\n"))
    except (OSError, UnicodeDecodeError):
        return None
    text = lines.str.strip_chars()
    bad = (text != "") & (~text.str.starts_with("{") | text.str.json_path_match("$").is_null())
    hits = bad.arg_true()
    return int(hits[0]) + 1 if hits.len() else None


DAY_END = pl.duration(days=1, microseconds=-1)
"""Added to a bare date's midnight: the last microsecond of that UTC day."""


def _parse_timestamp(col: pl.Expr, *, day_end: bool = False) -> pl.Expr:
    text = col.str.strip_chars().str.replace(r"Z$", "+00:00").str.replace("T", " ")
    date_only = text.str.to_datetime("%Y-%m-%d", strict=False, time_unit="us")
    if day_end:
        date_only = date_only + DAY_END
    return pl.coalesce(
        text.str.to_datetime("%Y-%m-%d %H:%M:%S%.f%:z", strict=False, time_zone="UTC"),
        text.str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False).dt.replace_time_zone("UTC"),
        text.str.to_datetime("%Y-%m-%d %H:%M%:z", strict=False, time_zone="UTC"),
        text.str.to_datetime("%Y-%m-%d %H:%M", strict=False).dt.replace_time_zone("UTC"),
        date_only.dt.replace_time_zone("UTC"),
    ).dt.cast_time_unit("us")


def _to_json_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, pl.Series):
        value = value.to_list()
    return json.dumps(value, default=str)


def _convert(source: pl.DataFrame, col: Column) -> pl.Expr:
    """An expression that parses `col` from whatever type the file gave it."""
    dtype = source.schema[col.name]
    expr = pl.col(col.name)
    nested = isinstance(dtype, pl.List | pl.Struct | pl.Array)
    if col.type == "json":
        if nested:
            return expr.map_elements(_to_json_text, return_dtype=pl.String)
        return expr.cast(pl.String)
    if nested:
        return pl.lit(None, dtype=pl.String)
    if col.type == "timestamp":
        if isinstance(dtype, pl.Datetime):
            return (
                expr.dt.convert_time_zone("UTC")
                if dtype.time_zone
                else expr.dt.replace_time_zone("UTC")
            ).dt.cast_time_unit("us")
        if dtype == pl.Date:
            midnight = expr.cast(pl.Datetime("us"))
            return (midnight + DAY_END if col.day_end else midnight).dt.replace_time_zone("UTC")
        return _parse_timestamp(expr.cast(pl.String), day_end=col.day_end)
    if col.type == "bool":
        if dtype == pl.Boolean:
            return expr
        text = expr.cast(pl.String).str.strip_chars().str.to_lowercase()
        return (
            pl.when(text.is_in(TRUE_WORDS))
            .then(True)
            .when(text.is_in(FALSE_WORDS))
            .then(False)
            .otherwise(None)
        )
    if col.type in ("float", "int"):
        target = pl.Float64 if col.type == "float" else pl.Int64
        if dtype == pl.String:
            return expr.str.strip_chars().cast(target, strict=False)
        return expr.cast(target, strict=False)
    # Text is stored exactly as given (IDs and vocabularies are compared exactly); only
    # the empty string means "no value".
    text = expr.cast(pl.String)
    return pl.when(text == "").then(None).otherwise(text)


def coerce(
    raw: pl.DataFrame, schema: FileSchema, path: Path, *, first_row: int = 1
) -> pl.DataFrame:
    """Typed rows of `raw` under `schema`, or an `IngestError` for the first problem.

    `first_row` is the file row number of `raw`'s first row (a chunk of a streamed file).
    """
    names = {c.name for c in schema.columns}
    missing = [c.name for c in schema.columns if c.required and c.name not in raw.columns]
    if missing:
        raise IngestError(path, f"missing required column(s): {', '.join(missing)}")
    unknown = [c for c in raw.columns if c not in names]
    if unknown:
        raise IngestError(
            path,
            f"unknown column(s) {', '.join(map(repr, unknown))}; "
            f"a {schema.kind} file has {', '.join(c.name for c in schema.columns)}",
        )
    raw = raw.with_row_index(ROW, offset=first_row).with_columns(pl.col(ROW).cast(pl.Int64))
    if raw.height == 0:
        raise IngestError(path, "has no rows")
    frame = raw.select(
        ROW,
        *[pl.col(name).alias(RAW + name) for name in raw.columns if name != ROW],
        *[_convert(raw, c).alias(c.name) for c in schema.columns if c.name in raw.columns],
    )
    failed = first_failure(frame, checks(schema, raw.schema))
    if failed is not None:
        raise _refusal(frame, failed, path)
    parsed = frame.select(
        ROW,
        *[
            value(c).alias(c.name) if c.name in raw.columns else pl.lit(c.default).alias(c.name)
            for c in schema.columns
        ],
    )
    if schema.suite is None:
        _check_unique_key(parsed, schema, path)
    return parsed


def _refusal(frame: pl.DataFrame, failed: Check, path: Path) -> IngestError:
    """The error for the first row of `frame` that breaks `failed`, quoting its value."""
    quote = pl.lit(None) if failed.quote is None else failed.quote
    row, quoted = frame.filter(failed.bad).select(ROW, quote.alias("quote")).row(0)
    message = failed.why.replace("{value}", repr(quoted))
    return IngestError(path, message, row=int(row), column=failed.column)


def _check_unique_key(parsed: pl.DataFrame, schema: FileSchema, path: Path) -> None:
    keys = list(schema.key_columns)
    dup = parsed.select(keys).is_duplicated()
    if dup.any():
        first = parsed.filter(dup).select(keys).row(0)
        same = pl.all_horizontal([pl.col(k) == v for k, v in zip(keys, first, strict=True)])
        rows = parsed.filter(same)[ROW].to_list()
        shown = first[0] if len(keys) == 1 else first
        raise IngestError(
            path,
            f"duplicate key {shown!r} (also in row {rows[0]})",
            row=rows[1],
            column=", ".join(keys),
        )


def read_ledger_file(path: Path, kind: str | None = None) -> LedgerFile:
    """Read, checksum and validate one file."""
    if not path.is_file():
        raise IngestError(path, "no such file")
    schema = SCHEMAS[kind or detect_kind(path)]
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    frame = coerce(read_raw(path), schema, path)
    return LedgerFile(path=path, schema=schema, sha256=digest, frame=frame)
