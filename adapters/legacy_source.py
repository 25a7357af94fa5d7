"""Read a legacy `role_memory` table (SQLite or PostgreSQL) in chunks sorted by ID.

Every column except `score` is read as text (`CAST(... AS TEXT)`), so a JSON or
timestamp column arrives exactly as the legacy database renders it, and the row
checksums of `reflexmem.ledger.legacy` do not depend on a driver's type conversions.
Chunks bound the memory a migration needs, whatever the legacy table's size.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import sqlalchemy as sa

from adapters.db import make_engine
from reflexmem.ledger.legacy import LEGACY_TABLE, LegacySchemaError, check_columns
from reflexmem.redact import redact

CHUNK_ROWS = 50_000


@dataclass(frozen=True)
class LegacySource:
    """An opened legacy database: its engine, the legacy columns present, its row count."""

    engine: sa.Engine
    columns: tuple[str, ...]
    rows: int
    url: str

    @property
    def label(self) -> str:
        """The URL with any password redacted (what reports and logs store)."""
        return str(redact(self.url))

    def chunks(self, size: int = CHUNK_ROWS) -> Iterator[pl.DataFrame]:
        """The legacy rows, sorted by ID, `size` at a time (one server-side cursor)."""
        q = self.engine.dialect.identifier_preparer.quote
        cols = ", ".join(
            q(c) if c == "score" else f"CAST({q(c)} AS TEXT) AS {q(c)}" for c in self.columns
        )
        sql = sa.text(f"SELECT {cols} FROM {q(LEGACY_TABLE)} ORDER BY CAST({q('id')} AS TEXT)")
        with self.engine.connect() as conn:
            result = conn.execution_options(stream_results=True, yield_per=size).execute(sql)
            for part in result.partitions(size):
                yield pl.DataFrame(
                    [tuple(r) for r in part],
                    schema=list(self.columns),
                    orient="row",
                    infer_schema_length=None,
                )


def _read_only(url: str) -> sa.Engine:
    """An engine that cannot write: a legacy SQLite file opens `mode=ro` (never created)."""
    parsed = sa.make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return make_engine(url)
    path = Path(parsed.database or "")
    if not path.is_file():
        raise LegacySchemaError(f"legacy SQLite file {path} does not exist")
    uri = f"file:{path.resolve()}?mode=ro"
    return sa.create_engine("sqlite://", creator=lambda: sqlite3.connect(uri, uri=True))


def open_legacy(url: str) -> LegacySource:
    """Open the legacy database; `LegacySchemaError` if the table or a required column is absent."""
    engine = _read_only(url)
    inspector = sa.inspect(engine)
    if not inspector.has_table(LEGACY_TABLE):
        engine.dispose()
        raise LegacySchemaError(f"{redact(url)} has no table {LEGACY_TABLE!r}")
    names = [str(c["name"]).lower() for c in inspector.get_columns(LEGACY_TABLE)]
    try:
        present = check_columns(names)
    except LegacySchemaError:
        engine.dispose()
        raise
    with engine.connect() as conn:
        rows = conn.execute(sa.text(f"SELECT COUNT(*) FROM {LEGACY_TABLE}")).scalar_one()
    return LegacySource(engine=engine, columns=present, rows=int(rows), url=url)
