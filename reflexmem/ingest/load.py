"""Load validated ledger files in one transaction: all of them, or nothing.

Rows go first into a temporary staging table by the database's bulk path; set-based SQL
then rejects dangling references, rejects rows that contradict what is stored under the
same key, and appends only keys not seen before, so re-ingesting a file changes nothing.
Market bars take their own path (`reflexmem.ingest.bars`): a file that cannot be parsed
still fails the whole ingest, but a bar that parses and breaks an expectation is
quarantined while the rest of its file loads.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import sqlalchemy as sa

from reflexmem.ingest.bars import BarValidator, load_bars
from reflexmem.ingest.read import ROW, IngestError, LedgerFile, read_ledger_file
from reflexmem.ingest.schemas import INGEST_ORDER, SCHEMAS, FileSchema
from reflexmem.ledger.bulk import bulk_insert, quote_ident
from reflexmem.ledger.models import Base, IngestedFile


@dataclass
class IngestReport:
    """Rows added, already stored and quarantined per kind; files ingested before."""

    added: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    unchanged_rows: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    quarantined: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    quarantine_reasons: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    skipped_files: list[Path] = field(default_factory=list)

    @property
    def total_added(self) -> int:
        """All rows written."""
        return sum(self.added.values())

    @property
    def total_quarantined(self) -> int:
        """All rows held back in `quarantine`."""
        return sum(self.quarantined.values())

    @property
    def kinds(self) -> list[str]:
        """The kinds this ingest loaded, in load order."""
        seen = set(self.added) | set(self.unchanged_rows) | set(self.quarantined)
        return [k for k in INGEST_ORDER if k in seen]


def _table_columns(schema: FileSchema) -> list[str]:
    cols = [c.name for c in schema.columns]
    if schema.kind == "previews":
        cols.append("consume_count")
    return cols


def _prepare(file: LedgerFile) -> pl.DataFrame:
    frame = file.frame
    if file.schema.kind == "previews":
        half = frame["consumed_at"].is_null() != frame["consumed_by_decision_id"].is_null()
        if half.any():
            row = int(frame.filter(half)[ROW][0])
            raise IngestError(
                file.path,
                "consumed_at and consumed_by_decision_id must both be set or both be empty",
                row=row,
                column="consumed_at",
            )
        frame = frame.with_columns(
            pl.col("consumed_at").is_not_null().cast(pl.Int64).alias("consume_count")
        )
    if file.schema.kind == "outcomes":
        unsettled = (pl.col("status") == "settled") & pl.col("settled_at").is_null()
        bad = frame.select(unsettled).to_series()
        if bad.any():
            raise IngestError(
                file.path,
                "a settled position needs settled_at",
                row=int(frame.filter(bad)[ROW][0]),
                column="settled_at",
            )
    return frame


def _stage(conn: sa.Connection, schema: FileSchema, frame: pl.DataFrame) -> str:
    stage = f"stage_{schema.kind}"
    q = quote_ident(conn, stage)
    conn.execute(sa.text(f"DROP TABLE IF EXISTS {q}"))
    cols = _table_columns(schema)
    select = ", ".join(quote_ident(conn, c) for c in cols)
    conn.execute(
        sa.text(
            f"CREATE TEMPORARY TABLE {q} AS SELECT {select} FROM "
            f"{quote_ident(conn, schema.table)} WHERE 1 = 0"
        )
    )
    conn.execute(sa.text(f"ALTER TABLE {q} ADD COLUMN {ROW} INTEGER"))
    bulk_insert(conn, stage, frame.select([*cols, ROW]))
    if conn.dialect.name == "postgresql":
        conn.execute(sa.text(f"ANALYZE {q}"))
    return stage


def _check_references(conn: sa.Connection, file: LedgerFile, stage: str) -> None:
    for col in file.schema.columns:
        if col.references is None:
            continue
        parent = SCHEMAS[col.references]
        c, pk = quote_ident(conn, col.name), quote_ident(conn, parent.single_key)
        hit = conn.execute(
            sa.text(
                f"SELECT s.{ROW}, s.{c} FROM {quote_ident(conn, stage)} s "
                f"WHERE s.{c} IS NOT NULL AND NOT EXISTS (SELECT 1 FROM "
                f"{quote_ident(conn, parent.table)} p WHERE p.{pk} = s.{c}) "
                f"ORDER BY s.{ROW} LIMIT 1"
            )
        ).first()
        if hit is not None:
            raise IngestError(
                file.path,
                f"{hit[1]!r} refers to no known {parent.kind[:-1]} ({parent.single_key})",
                row=int(hit[0]),
                column=col.name,
            )


def _check_position_executions(conn: sa.Connection, file: LedgerFile, stage: str) -> None:
    """A position that names its execution must name an execution of its own decision."""
    if file.schema.kind != "outcomes":
        return
    hit = conn.execute(
        sa.text(
            f"SELECT s.{ROW}, s.execution_id, e.decision_id FROM {quote_ident(conn, stage)} s "
            "JOIN trade_executions e ON e.execution_id = s.execution_id "
            f"WHERE e.decision_id <> s.decision_id ORDER BY s.{ROW} LIMIT 1"
        )
    ).first()
    if hit is not None:
        raise IngestError(
            file.path,
            f"execution {hit[1]!r} belongs to decision {hit[2]!r}, not to this position's",
            row=int(hit[0]),
            column="execution_id",
        )


def _canonical_json(text: str | None) -> str | None:
    return None if text is None else json.dumps(json.loads(text), sort_keys=True)


def _normalise_for_compare(frame: pl.DataFrame, json_cols: list[str]) -> pl.DataFrame:
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


def _check_conflicts(conn: sa.Connection, file: LedgerFile, stage: str, frame: pl.DataFrame) -> int:
    """Rows already stored under the same key must be identical; returns how many there were."""
    schema = file.schema
    keys = list(schema.key_columns)
    cols = _table_columns(schema)
    table = Base.metadata.tables[schema.table]
    staged = sa.table(stage, *[sa.column(k) for k in keys])
    json_cols = [c.name for c in schema.columns if c.type == "json"]
    selected = [sa.cast(table.c[c], sa.Text) if c in json_cols else table.c[c] for c in cols]
    query = sa.select(*selected).join(staged, sa.and_(*[staged.c[k] == table.c[k] for k in keys]))
    rows = conn.execute(query).fetchall()
    if not rows:
        return 0
    incoming = frame.select([*cols, ROW])
    stored = pl.DataFrame(
        [tuple(r) for r in rows], schema=incoming.drop(ROW).schema, orient="row", strict=False
    )
    stored = stored.with_columns(
        [
            pl.col(n).dt.replace_time_zone("UTC")
            for n, t in stored.schema.items()
            if isinstance(t, pl.Datetime) and t.time_zone is None
        ]
    )
    a = _normalise_for_compare(incoming.drop(ROW), json_cols).with_columns(incoming[ROW])
    b = _normalise_for_compare(stored, json_cols)
    joined = a.join(b, on=keys, suffix="__stored")
    for c in cols:
        if c in keys:
            continue
        differs = joined.filter(pl.col(c).ne_missing(pl.col(f"{c}__stored")))
        if differs.height:
            row = differs.sort(ROW).row(0, named=True)
            key = row[keys[0]] if len(keys) == 1 else tuple(row[k] for k in keys)
            raise IngestError(
                file.path,
                f"key {key!r} is already stored with {c}={row[c + '__stored']!r}, "
                f"this file says {row[c]!r}",
                row=int(row[ROW]),
                column=c,
            )
    return len(rows)


def _append_new(conn: sa.Connection, schema: FileSchema, stage: str) -> int:
    cols = ", ".join(quote_ident(conn, c) for c in _table_columns(schema))
    table = quote_ident(conn, schema.table)
    same = " AND ".join(
        f"t.{k} = s.{k}" for k in (quote_ident(conn, c) for c in schema.key_columns)
    )
    result = conn.execute(
        sa.text(
            f"INSERT INTO {table} ({cols}) SELECT {cols} FROM {quote_ident(conn, stage)} s "
            f"WHERE NOT EXISTS (SELECT 1 FROM {table} t WHERE {same})"
        )
    )
    return int(result.rowcount)


def ingest_files(
    conn: sa.Connection,
    paths: Sequence[Path],
    *,
    kinds: Sequence[str | None] | None = None,
    validate_bars: BarValidator | None = None,
    now: datetime | None = None,
) -> IngestReport:
    """Validate every file, then load them in dependency order on `conn`'s transaction.

    Bars files need `validate_bars` (the CLI passes `expectations.bars.validate_bars`);
    `now` (aware, default the current time) stamps the load and bounds bar timestamps.
    """
    kinds = kinds or [None] * len(paths)
    files = [read_ledger_file(p, k) for p, k in zip(paths, kinds, strict=True)]
    return load_files(conn, files, validate_bars=validate_bars, now=now)


def load_files(
    conn: sa.Connection,
    files: Sequence[LedgerFile],
    *,
    validate_bars: BarValidator | None = None,
    now: datetime | None = None,
    record: bool = True,
) -> IngestReport:
    """Load validated files in dependency order on `conn`'s transaction.

    `record=False` loads rows that came from no file (the agent API's records): they
    are not entered in `ingested_files`, and re-sending them is answered by the same
    key-by-key comparison as a re-ingested file (unchanged rows, or a conflict).
    """
    if validate_bars is None and any(f.schema.suite == "bars" for f in files):
        raise ValueError("bars files are judged by their expectation suite: pass validate_bars")
    now = datetime.now(UTC) if now is None else now
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    report = IngestReport()
    seen = set(conn.execute(sa.select(IngestedFile.sha256)).scalars()) if record else set()
    todo: list[tuple[LedgerFile, pl.DataFrame]] = []
    for f in files:
        if record and f.sha256 in seen:
            report.skipped_files.append(f.path)
        else:
            todo.append((f, _prepare(f)))
            seen.add(f.sha256)
    todo.sort(key=lambda item: INGEST_ORDER.index(item[0].schema.kind))
    for file, frame in todo:
        kind = file.schema.kind
        if file.schema.suite == "bars":
            assert validate_bars is not None
            bars = load_bars(conn, file, validate_bars, now=now)
            report.added[kind] += bars.added
            report.unchanged_rows[kind] += bars.unchanged
            report.quarantined[kind] += bars.quarantined
            for reason, n in bars.by_reason.items():
                report.quarantine_reasons[reason] += n
            if record:
                _record(conn, file, frame.height, now)
            continue
        stage = _stage(conn, file.schema, frame)
        _check_references(conn, file, stage)
        _check_position_executions(conn, file, stage)
        report.unchanged_rows[file.schema.kind] += _check_conflicts(conn, file, stage, frame)
        report.added[file.schema.kind] += _append_new(conn, file.schema, stage)
        conn.execute(sa.text(f"DROP TABLE {quote_ident(conn, stage)}"))
        if record:
            _record(conn, file, frame.height, now)
    return report


def _record(conn: sa.Connection, file: LedgerFile, rows: int, now: datetime) -> None:
    conn.execute(
        sa.insert(IngestedFile).values(
            sha256=file.sha256,
            path=str(file.path),
            kind=file.schema.kind,
            rows=rows,
            ingested_at=now,
        )
    )
