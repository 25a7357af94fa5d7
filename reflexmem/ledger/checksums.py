"""Checksums of every ledger table, for "these two ledgers hold the same facts".

Two runs of the same input (the direct path and the flow, or an interrupted run and an
uninterrupted one) must leave the same rows. They cannot leave the same *generated*
values: batch and run IDs are fresh UUIDs, wall-clock stamps differ, autoincrement keys
follow insertion order. `VOLATILE` names the rule that leaves those columns out; every
other column of every table is compared, rows sorted, so row order never matters.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from typing import Any

import polars as pl
import sqlalchemy as sa

from reflexmem.ledger.bulk import read_frame
from reflexmem.ledger.models import Base

VOLATILE = re.compile(r"(_at$|^at$|batch_id$|run_id$|^holder$|^recall_id$)")
"""Generated IDs (batches, evaluation and MLflow runs, recalls, lock holders) and stamps.

The rule applies to columns and to the keys of JSON values (a case's provenance names
the admission batch that created it)."""

AUTOINCREMENT = {"component_id", "observation_id", "quarantine_id"}


def compared_columns(table: sa.Table) -> list[str]:
    """The columns of `table` whose values two equivalent runs must agree on."""
    return [
        c.name for c in table.columns if not VOLATILE.search(c.name) and c.name not in AUTOINCREMENT
    ]


def excluded_columns(tables: Iterable[sa.Table] | None = None) -> dict[str, list[str]]:
    """Per table, the columns left out of the comparison (for a report to name them)."""
    chosen = list(tables or Base.metadata.sorted_tables)
    return {
        t.name: [c.name for c in t.columns if c.name not in compared_columns(t)] for t in chosen
    }


def _drop_volatile(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_volatile(v) for k, v in value.items() if not VOLATILE.search(str(k))}
    if isinstance(value, list):
        return [_drop_volatile(v) for v in value]
    return value


def _stable_json(text: str) -> str:
    return json.dumps(_drop_volatile(json.loads(text)), sort_keys=True)


def table_checksums(conn: sa.Connection) -> dict[str, tuple[int, str]]:
    """Per ledger table: row count and a SHA-256 over its sorted compared columns."""
    out: dict[str, tuple[int, str]] = {}
    for table in Base.metadata.sorted_tables:
        cols = compared_columns(table)
        q = ", ".join(conn.dialect.identifier_preparer.quote(c) for c in cols)
        frame = read_frame(conn, f"SELECT {q} FROM {table.name}")
        json_cols = [c for c in cols if isinstance(table.c[c].type, sa.JSON)]
        frame = frame.with_columns(
            pl.col(c).map_elements(_stable_json, return_dtype=pl.String) for c in json_cols
        )
        frame = frame.select(pl.all().fill_null("\x00null")).sort(cols)
        digest = hashlib.sha256()
        for row in frame.iter_rows():
            digest.update("\x1f".join(row).encode("utf-8"))
            digest.update(b"\x1e")
        out[table.name] = (frame.height, digest.hexdigest())
    return out
