"""Operation `migrate_legacy`: legacy `role_memory` rows into the ledger, with a report.

The caller (the `reflexmem migrate legacy` command) reads the legacy table in chunks
sorted by ID and makes a verified backup of the target first; this operation maps each
chunk (`reflexmem.ledger.legacy`), writes it in one transaction for the whole run, and
stores the retention report in `legacy_migrations`. A run that would break
conservation (rows in != moved + quarantined + unchanged) rolls back.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import polars as pl
import sqlalchemy as sa

from reflexmem.ledger.bulk import bulk_insert
from reflexmem.ledger.enums import SubjectKind
from reflexmem.ledger.legacy import LegacySchemaError, RetentionTally, normalise, plan_chunk
from reflexmem.ledger.legacy_models import LegacyCase, LegacyMigration
from reflexmem.ledger.models import Quarantine, TradingDecision
from reflexmem.operations.resources import Resources


@dataclass(frozen=True)
class LegacyReport:
    """The retention report of one run (also stored in `legacy_migrations.report`)."""

    migration_id: str
    source: str
    rows_in: int
    moved: int
    quarantined: int
    unchanged: int
    changed_since_migrated: int
    checksums: dict[str, str]
    backup: Mapping[str, Any]
    started_at: datetime
    finished_at: datetime

    def to_dict(self) -> dict[str, Any]:
        """The JSON object `--json` prints."""
        return {
            "migration_id": self.migration_id,
            "source": self.source,
            "rows_in": self.rows_in,
            "moved": self.moved,
            "quarantined": self.quarantined,
            "unchanged": self.unchanged,
            "changed_since_migrated": self.changed_since_migrated,
            "checksums": self.checksums,
            "backup": dict(self.backup),
            "started_at": self.started_at.isoformat(),
            "finished_at": self.finished_at.isoformat(),
        }


def _migrated(conn: sa.Connection, ids: list[str]) -> pl.DataFrame:
    cases = conn.execute(
        sa.select(LegacyCase.legacy_id, LegacyCase.row_sha256).where(LegacyCase.legacy_id.in_(ids))
    ).all()
    held = conn.execute(
        sa.select(Quarantine.subject_id, Quarantine.detail).where(
            Quarantine.subject_kind == SubjectKind.LEGACY_ROW, Quarantine.subject_id.in_(ids)
        )
    ).all()
    schema: dict[str, pl.DataType] = {"legacy_id": pl.String(), "row_sha256": pl.String()}
    moved = pl.DataFrame(cases, schema=schema, orient="row")
    quarantined = pl.DataFrame(
        held, schema={"legacy_id": pl.String, "detail": pl.String}, orient="row"
    ).select("legacy_id", pl.col("detail").str.json_path_match("$.row_sha256").alias("row_sha256"))
    return pl.concat([moved, quarantined.cast(pl.String)])


def _decisions(conn: sa.Connection, ids: list[str]) -> list[str]:
    if not ids:
        return []
    q = sa.select(TradingDecision.decision_id).where(TradingDecision.decision_id.in_(ids))
    return list(conn.execute(q).scalars())


SQL_IN_CHUNK = 10_000
"""IDs per `IN (...)` lookup: under SQLite's 32,766 bound-parameter limit."""


def _lookup(conn: sa.Connection, rows: pl.DataFrame) -> tuple[pl.DataFrame, list[str]]:
    migrated: list[pl.DataFrame] = []
    decisions: list[str] = []
    for start in range(0, rows.height, SQL_IN_CHUNK):
        part = rows.slice(start, SQL_IN_CHUNK)
        migrated.append(_migrated(conn, part["id"].to_list()))
        decisions += _decisions(conn, part["decision_id"].drop_nulls().unique().to_list())
    return pl.concat(migrated), decisions


def migrate_legacy(
    res: Resources,
    *,
    chunks: Iterable[pl.DataFrame],
    source: str,
    backup: Mapping[str, Any],
    now: datetime | None = None,
) -> LegacyReport:
    """Move, quarantine or leave each legacy row; store and return the retention report."""
    started = now or datetime.now(UTC)
    migration_id = f"legacy-{uuid.uuid4().hex[:16]}"
    tally = RetentionTally()
    roles = list(res.registry.ids)
    with res.engine.begin() as conn:
        for chunk in chunks:
            rows = normalise(chunk)
            if rows["id"].is_duplicated().any():
                dup = rows.filter(rows["id"].is_duplicated())["id"][0]
                raise LegacySchemaError(f"legacy id {dup!r} occurs more than once")
            migrated, decisions = _lookup(conn, rows)
            plan = plan_chunk(
                rows,
                known_roles=roles,
                known_decisions=decisions,
                migrated=migrated,
                migration_id=migration_id,
                now=started,
            )
            bulk_insert(conn, LegacyCase.__tablename__, plan.cases)
            bulk_insert(conn, Quarantine.__tablename__, plan.quarantine)
            tally.add(rows, plan)
        if not tally.conserved:
            raise RuntimeError(f"legacy migration broke conservation: {tally.counts}")
        finished = datetime.now(UTC)
        report = LegacyReport(
            migration_id=migration_id,
            source=source,
            rows_in=tally.counts["rows_in"],
            moved=tally.counts["moved"],
            quarantined=tally.counts["quarantined"],
            unchanged=tally.counts["unchanged"],
            changed_since_migrated=tally.changed_since,
            checksums=tally.checksums(),
            backup=backup,
            started_at=started,
            finished_at=finished,
        )
        conn.execute(
            sa.insert(LegacyMigration).values(
                migration_id=migration_id,
                source=source,
                rows_in=report.rows_in,
                moved=report.moved,
                quarantined=report.quarantined,
                unchanged=report.unchanged,
                report=report.to_dict(),
                started_at=started,
                finished_at=finished,
            )
        )
    return report
