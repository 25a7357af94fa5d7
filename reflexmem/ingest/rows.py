"""Records sent as JSON objects (the agent API), validated by the very file contracts.

An agent runtime does not write files: it sends one decision, preview, execution or
fill at a time as a JSON object. Those objects are turned into the frame a JSONL file
of the same rows would give, then go through the same `coerce` (types, enums, lengths,
minimums, duplicate keys) and the same staged load (references, conflicts with what is
stored, append-only) as `reflexmem ingest`, so the two paths can never disagree about
what a valid row is. Errors are `IngestError`s naming the row and the field.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import polars as pl

from reflexmem.ingest.read import IngestError, LedgerFile, coerce
from reflexmem.ingest.schemas import SCHEMAS, FileSchema

RECORD_KINDS: tuple[str, ...] = ("decisions", "previews", "executions", "fills")
"""The kinds an agent records as it works (outcomes are settled by maturation)."""
MAX_ROWS = 10_000
"""Rows in one request; a larger backfill is a file for `reflexmem ingest`."""


def _text(value: object, json_column: bool) -> str | None:
    """A JSON value as the text a CSV cell would hold (JSON columns: JSON text)."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if json_column:
        return json.dumps(value, sort_keys=True)
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, float) else str(value)


def rows_file(kind: str, rows: Sequence[Mapping[str, object]]) -> LedgerFile:
    """Validate JSON rows of one kind as if they were a file; raise `IngestError` if bad.

    Rows are 1-based in errors, like a file's data rows. A field the contract does not
    have, a list or object where a single value belongs, or too many rows is refused
    here; everything else is the contract's own `coerce`.
    """
    schema: FileSchema = SCHEMAS[kind]
    where = Path(f"api:{kind}")
    if not rows:
        raise IngestError(where, "has no rows")
    if len(rows) > MAX_ROWS:
        raise IngestError(where, f"has {len(rows)} rows; at most {MAX_ROWS} per request")
    names = {c.name for c in schema.columns}
    for i, row in enumerate(rows, 1):
        unknown = [k for k in row if k not in names]
        if unknown:
            raise IngestError(
                where,
                f"unknown field; a {kind[:-1]} has {', '.join(c.name for c in schema.columns)}",
                row=i,
                column=unknown[0],
            )
        for col in schema.columns:
            if col.type != "json" and isinstance(row.get(col.name), list | dict):
                raise IngestError(where, "must be a single value", row=i, column=col.name)
    data = {
        c.name: [_text(row.get(c.name), c.type == "json") for row in rows] for c in schema.columns
    }
    raw = pl.DataFrame(data, schema=dict.fromkeys(data, pl.String))
    digest = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()
    return LedgerFile(path=where, schema=schema, sha256=digest, frame=coerce(raw, schema, where))
