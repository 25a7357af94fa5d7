"""Read a ledger file in bounded chunks, each coerced to its contract as it comes.

A million-row file read whole is several copies of the file in memory (the raw frame,
the parsed frame, the copies each check makes); read in chunks of `CHUNK_ROWS`, memory
is bounded by the chunk whatever the file's size. Each chunk goes through the same
`coerce` as a whole file, with its rows numbered as in the file, so an error names the
same row and column; checks that span chunks (a key repeated in two chunks) are made
in the database on the staged rows (`reflexmem.ingest.load`). Polars' streaming scans
infer the schema over the whole file before the first chunk, so every chunk has the
same column types.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import polars as pl

from reflexmem.ingest.read import SUFFIXES, IngestError, coerce, first_broken_line, read_raw
from reflexmem.ingest.schemas import FileSchema

CHUNK_ROWS = 100_000
"""Rows parsed and staged at a time: chosen as admission's chunk (`admission.admit`),
large enough that per-chunk overhead (a COPY, a handful of polars passes) is well under
1 % of the chunk's cost at 1e6 rows, small enough that a chunk's frames stay in tens of MB."""
HASH_BLOCK = 1 << 20


def file_digest(path: Path) -> str:
    """SHA-256 of the file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(HASH_BLOCK), b""):
            digest.update(block)
    return digest.hexdigest()


def _scan(path: Path, fmt: str) -> pl.LazyFrame:
    if fmt == "csv":
        return pl.scan_csv(path, infer_schema=False)
    if fmt == "parquet":
        return pl.scan_parquet(path)
    return pl.scan_ndjson(path, infer_schema_length=None)


def _unreadable(path: Path, fmt: str, exc: Exception) -> IngestError:
    line = first_broken_line(path) if fmt == "jsonl" else None
    if line is not None:
        return IngestError(path, f"line {line} is not a JSON object: {exc}", row=line)
    return IngestError(path, f"cannot be read as {fmt}: {exc}")


def coerced_chunks(
    path: Path, schema: FileSchema, *, chunk_rows: int = CHUNK_ROWS
) -> Iterator[pl.DataFrame]:
    """The file's typed rows, `chunk_rows` at a time (with `_row` numbered as in the file).

    A file with no rows (or one polars cannot stream) is read whole, so it fails exactly
    as `read.read_ledger_file` would.
    """
    fmt = SUFFIXES.get(path.suffix.lower())
    if fmt is None:
        raise IngestError(path, f"unsupported format {path.suffix!r} (use .csv, .parquet, .jsonl)")
    try:
        batches = iter(_scan(path, fmt).collect_batches(chunk_size=chunk_rows))
    except (pl.exceptions.PolarsError, OSError, ValueError) as exc:
        raise _unreadable(path, fmt, exc) from exc
    offset = 0
    while True:
        try:
            raw = next(batches, None)
        except (pl.exceptions.PolarsError, OSError, ValueError) as exc:
            raise _unreadable(path, fmt, exc) from exc
        if raw is None:
            break
        if raw.height == 0:
            continue
        yield coerce(raw, schema, path, first_row=offset + 1)
        offset += raw.height
    if offset == 0:
        yield coerce(read_raw(path), schema, path)
