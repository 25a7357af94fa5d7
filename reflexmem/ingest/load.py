"""Load validated ledger files in one transaction: all of them, or nothing.

Rows go first into a temporary staging table by the database's bulk path; set-based SQL
then rejects dangling references, rejects rows that contradict what is stored under the
same key, and appends only keys not seen before, so re-ingesting a file changes nothing.
Market bars take their own path (`reflexmem.ingest.bars`): a file that cannot be parsed
still fails the whole ingest, but a bar that parses and breaks an expectation is
quarantined while the rest of its file loads.

Ledger files are read, coerced and staged in bounded chunks (`reflexmem.ingest.stream`),
every file before any check against the ledger, so memory does not grow with a file's
size and an unreadable file still fails the ingest before anything is compared; a key
repeated across two chunks is found on the staged rows.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import sqlalchemy as sa

from reflexmem.ingest.bars import BarValidator, load_bars
from reflexmem.ingest.conflicts import check_conflicts, table_columns
from reflexmem.ingest.read import ROW, IngestError, LedgerFile, detect_kind, read_ledger_file
from reflexmem.ingest.schemas import INGEST_ORDER, SCHEMAS, FileSchema
from reflexmem.ingest.stream import CHUNK_ROWS, coerced_chunks, file_digest
from reflexmem.ledger.bulk import bulk_insert, quote_ident
from reflexmem.ledger.models import IngestedFile


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


def _prepare(path: Path, schema: FileSchema, frame: pl.DataFrame) -> pl.DataFrame:
    if schema.kind == "previews":
        half = frame["consumed_at"].is_null() != frame["consumed_by_decision_id"].is_null()
        if half.any():
            row = int(frame.filter(half)[ROW][0])
            raise IngestError(
                path,
                "consumed_at and consumed_by_decision_id must both be set or both be empty",
                row=row,
                column="consumed_at",
            )
        frame = frame.with_columns(
            pl.col("consumed_at").is_not_null().cast(pl.Int64).alias("consume_count")
        )
    if schema.kind == "outcomes":
        unsettled = (pl.col("status") == "settled") & pl.col("settled_at").is_null()
        bad = frame.select(unsettled).to_series()
        if bad.any():
            raise IngestError(
                path,
                "a settled position needs settled_at",
                row=int(frame.filter(bad)[ROW][0]),
                column="settled_at",
            )
    return frame


@dataclass(frozen=True)
class StagedFile:
    """A ledger file read, validated and staged chunk by chunk (`stage` is None if seen)."""

    path: Path
    schema: FileSchema
    sha256: str
    rows: int
    stage: str | None


def _create_stage(
    conn: sa.Connection, schema: FileSchema, stage: str, *, reuse: bool = False
) -> None:
    """An empty temporary table shaped like `schema`'s table, plus the file row number.

    `reuse`: keep a stage this connection made before (the caller empties it after use).
    A few rows recorded through the agent API would otherwise create and drop a table
    per request: on PostgreSQL each is a write to the system catalogs and a cache
    invalidation every other session must process, which showed as stalls of a few
    hundred milliseconds under concurrent recall (docs/api.md).
    """
    q = quote_ident(conn, stage)
    if not reuse:
        conn.execute(sa.text(f"DROP TABLE IF EXISTS {q}"))
    select = ", ".join(quote_ident(conn, c) for c in table_columns(schema))
    conn.execute(
        sa.text(
            f"CREATE TEMPORARY TABLE {'IF NOT EXISTS ' if reuse else ''}{q} AS SELECT "
            f"{select}, CAST(NULL AS INTEGER) AS {ROW} FROM "
            f"{quote_ident(conn, schema.table)} WHERE 1 = 0"
        )
    )


def _stage_file(
    conn: sa.Connection,
    path: Path,
    schema: FileSchema,
    stage: str | None,
    chunk_rows: int,
) -> int:
    """Coerce and check every chunk; stage it unless `stage` is None. Returns the row count."""
    cols = [*table_columns(schema), ROW]
    if stage is not None:
        _create_stage(conn, schema, stage)
    rows = 0
    for chunk in coerced_chunks(path, schema, chunk_rows=chunk_rows):
        frame = _prepare(path, schema, chunk)
        rows += frame.height
        if stage is not None:
            bulk_insert(conn, stage, frame.select(cols))
    if stage is not None and conn.dialect.name == "postgresql":
        conn.execute(sa.text(f"ANALYZE {quote_ident(conn, stage)}"))
    return rows


def _check_repeated_keys(conn: sa.Connection, file: StagedFile, stage: str) -> None:
    """A key given twice in one file (within a chunk `coerce` already refused it)."""
    key = quote_ident(conn, file.schema.single_key)
    q = quote_ident(conn, stage)
    hit = conn.execute(
        sa.text(
            f"SELECT {key} FROM {q} GROUP BY {key} HAVING COUNT(*) > 1 ORDER BY MIN({ROW}) LIMIT 1"
        )
    ).first()
    if hit is None:
        return
    rows = conn.execute(
        sa.text(f"SELECT {ROW} FROM {q} WHERE {key} = :k ORDER BY {ROW} LIMIT 2"), {"k": hit[0]}
    ).scalars()
    first, second = (int(r) for r in rows)
    raise IngestError(
        file.path,
        f"duplicate key {hit[0]!r} (also in row {first})",
        row=second,
        column=file.schema.single_key,
    )


def _check_references(conn: sa.Connection, file: StagedFile, stage: str) -> None:
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


def _check_position_executions(conn: sa.Connection, file: StagedFile, stage: str) -> None:
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


def _append_new(conn: sa.Connection, schema: FileSchema, stage: str) -> int:
    cols = ", ".join(quote_ident(conn, c) for c in table_columns(schema))
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


def _apply_staged(
    conn: sa.Connection,
    file: StagedFile,
    report: IngestReport,
    chunk_rows: int,
    *,
    reuse: bool = False,
) -> None:
    """Check the staged rows against themselves and the ledger, append the new keys.

    The stage is dropped after, or only emptied when it is to be `reuse`d.
    """
    stage = file.stage
    assert stage is not None
    kind = file.schema.kind
    _check_repeated_keys(conn, file, stage)
    _check_references(conn, file, stage)
    _check_position_executions(conn, file, stage)
    report.unchanged_rows[kind] += check_conflicts(
        conn, file.path, file.schema, stage, chunk_rows=chunk_rows
    )
    report.added[kind] += _append_new(conn, file.schema, stage)
    emptied = "DELETE FROM" if reuse else "DROP TABLE"
    conn.execute(sa.text(f"{emptied} {quote_ident(conn, stage)}"))


def load_records(
    conn: sa.Connection, files: Sequence[LedgerFile], *, chunk_rows: int = CHUNK_ROWS
) -> IngestReport:
    """Load rows that came from no file (the agent API's records) on `conn`'s transaction.

    They pass the same staging and set-based checks as a file's rows; they are not
    entered in `ingested_files`, and re-sending them is answered by the same key-by-key
    comparison as a re-ingested file (unchanged rows, or a conflict).
    """
    if any(f.schema.suite is not None for f in files):
        raise ValueError("bars are ingested from files, not recorded row by row")
    report = IngestReport()
    ordered = sorted(files, key=lambda f: INGEST_ORDER.index(f.schema.kind))
    for i, file in enumerate(ordered):
        stage = f"stage_{file.schema.kind}_record_{i}"
        frame = _prepare(file.path, file.schema, file.frame)
        _create_stage(conn, file.schema, stage, reuse=True)
        bulk_insert(conn, stage, frame.select([*table_columns(file.schema), ROW]))
        staged = StagedFile(file.path, file.schema, file.sha256, frame.height, stage)
        _apply_staged(conn, staged, report, chunk_rows, reuse=True)
    return report


def ingest_files(
    conn: sa.Connection,
    paths: Sequence[Path],
    *,
    kinds: Sequence[str | None] | None = None,
    validate_bars: BarValidator | None = None,
    now: datetime | None = None,
    chunk_rows: int = CHUNK_ROWS,
) -> IngestReport:
    """Validate every file, then load them in dependency order on `conn`'s transaction.

    Bars files need `validate_bars` (the CLI passes `expectations.bars.validate_bars`);
    `now` (aware, default the current time) stamps the load and bounds bar timestamps.
    Ledger files are read and staged `chunk_rows` at a time.
    """
    kinds = kinds or [None] * len(paths)
    now = datetime.now(UTC) if now is None else now
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    report = IngestReport()
    seen = set(conn.execute(sa.select(IngestedFile.sha256)).scalars())
    files: list[LedgerFile | StagedFile] = []
    for i, (path, kind) in enumerate(zip(paths, kinds, strict=True)):
        if not path.is_file():
            raise IngestError(path, "no such file")
        schema = SCHEMAS[kind or detect_kind(path)]
        if schema.suite is not None:
            files.append(read_ledger_file(path, kind))
            continue
        sha = file_digest(path)
        stage = None if sha in seen else f"stage_{schema.kind}_{i}"
        rows = _stage_file(conn, path, schema, stage, chunk_rows)
        files.append(StagedFile(path, schema, sha, rows, stage))
    if validate_bars is None and any(f.schema.suite == "bars" for f in files):
        raise ValueError("bars files are judged by their expectation suite: pass validate_bars")
    todo: list[LedgerFile | StagedFile] = []
    for f in files:
        if f.sha256 in seen:
            report.skipped_files.append(f.path)
        else:
            todo.append(f)
            seen.add(f.sha256)
    todo.sort(key=lambda f: INGEST_ORDER.index(f.schema.kind))
    for file in todo:
        kind = file.schema.kind
        if isinstance(file, LedgerFile):
            assert validate_bars is not None
            bars = load_bars(conn, file, validate_bars, now=now)
            report.added[kind] += bars.added
            report.unchanged_rows[kind] += bars.unchanged
            report.quarantined[kind] += bars.quarantined
            for reason, n in bars.by_reason.items():
                report.quarantine_reasons[reason] += n
            _record(conn, file, file.frame.height, now)
            continue
        _apply_staged(conn, file, report, chunk_rows)
        _record(conn, file, file.rows, now)
    for file in files:
        if isinstance(file, StagedFile) and file.stage is not None and file not in todo:
            conn.execute(sa.text(f"DROP TABLE IF EXISTS {quote_ident(conn, file.stage)}"))
    return report


def _record(conn: sa.Connection, file: LedgerFile | StagedFile, rows: int, now: datetime) -> None:
    conn.execute(
        sa.insert(IngestedFile).values(
            sha256=file.sha256,
            path=str(file.path),
            kind=file.schema.kind,
            rows=rows,
            ingested_at=now,
        )
    )
