"""One admission batch: lock, stage, validate with the injected suite runner, decide, persist.

The validator is injected so that the core never imports Great Expectations; the
expectations package supplies the real one, and every caller (CLI, task, benchmark)
passes it in. Persisting is set-based: verdicts are bulk-loaded and joined back to the
ledger with INSERT ... SELECT, so no row passes through the ORM.

Batches are serialised by the admission lock (`lock.py`), taken before staging: two
batches never judge the same execution, and a batch that waited finds the other's
verdicts already written. A batch that finds nothing to do (no new execution, no case
to revoke) writes nothing at all, not even its batch row, so re-running after a crash
leaves the ledger as an uninterrupted run would.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

import polars as pl
import sqlalchemy as sa

from reflexmem.admission.decide import FAILURE_SCHEMA, Verdicts, decide
from reflexmem.admission.lock import DEFAULT_WAIT_S, acquire_admission_lock
from reflexmem.admission.stage import stage_candidates
from reflexmem.ledger.bulk import bulk_insert
from reflexmem.ledger.models import AdmissionBatch

Validator = Callable[[pl.DataFrame, Sequence[str]], pl.DataFrame]
"""(staged batch, registered role IDs) -> failures (execution_id, expectation, severity)."""

SUITE_NAME = "admission"


@dataclass(frozen=True)
class AdmissionResult:
    """Counts of one batch; `rows_in == admitted + pending + quarantined` always.

    `revoked` counts cases of earlier batches this batch took back; `busy` is True when
    another admission held the lock for the whole wait (nothing was judged).
    """

    batch_id: str
    rows_in: int
    admitted: int
    pending: int
    quarantined: int
    by_reason: dict[str, int] = field(default_factory=dict)
    pending_by_reason: dict[str, int] = field(default_factory=dict)
    revoked: int = 0
    revoked_by_reason: dict[str, int] = field(default_factory=dict)
    busy: bool = False


CASE_INSERT = """
INSERT INTO role_cases (case_id, execution_id, decision_id, role_id, symbol, scenario,
                        decision_text, state, pending_reason, provenance, batch_id,
                        decided_at, admitted_at)
SELECT c.case_id, e.execution_id, d.decision_id, d.role_id, d.symbol, d.scenario,
       COALESCE(d.rationale, ''), c.state, c.pending_reason, {provenance}, c.batch_id,
       d.decided_at, :now
FROM admit_verdicts c
JOIN trade_executions e ON e.execution_id = c.execution_id
JOIN trading_decisions d ON d.decision_id = e.decision_id
"""


def persist(conn: sa.Connection, verdicts: Verdicts, *, batch_id: str, now: datetime) -> None:
    """Write role cases, quarantine rows and the batch's conservation record."""
    conn.execute(sa.text("DROP TABLE IF EXISTS admit_verdicts"))
    conn.execute(
        sa.text(
            "CREATE TEMPORARY TABLE admit_verdicts (case_id VARCHAR(80), execution_id "
            "VARCHAR(64), batch_id VARCHAR(64), state VARCHAR(32), pending_reason VARCHAR(32),"
            " provenance TEXT)"
        )
    )
    bulk_insert(conn, "admit_verdicts", verdicts.cases)
    provenance = (
        "CAST(c.provenance AS JSON)" if conn.dialect.name == "postgresql" else "c.provenance"
    )
    conn.execute(sa.text(CASE_INSERT.format(provenance=provenance)), {"now": now})
    conn.execute(sa.text("DROP TABLE admit_verdicts"))
    if verdicts.revoked:
        revocations = verdicts.revocations.with_columns(
            pl.lit(now).dt.replace_time_zone("UTC").alias("revoked_at")
        )
        bulk_insert(conn, "case_revocations", revocations)
        conn.execute(
            sa.text(
                "UPDATE role_cases SET state = 'revoked', pending_reason = NULL "
                "WHERE case_id IN (SELECT case_id FROM case_revocations "
                "WHERE revoked_by_batch_id = :b)"
            ),
            {"b": batch_id},
        )
    quarantine = verdicts.quarantine.with_columns(
        pl.lit(now).dt.replace_time_zone("UTC").alias("created_at")
    ).select(
        "subject_kind",
        "subject_id",
        "decision_id",
        "role_id",
        "reason_code",
        "failed_expectations",
        "detail",
        "batch_id",
        "created_at",
    )
    bulk_insert(conn, "quarantine", quarantine)
    conn.execute(
        sa.insert(AdmissionBatch).values(
            batch_id=batch_id,
            started_at=now,
            rows_in=verdicts.rows_in,
            admitted=verdicts.admitted,
            pending=verdicts.pending,
            quarantined=verdicts.quarantined,
            revoked=verdicts.revoked,
            suite=SUITE_NAME,
        )
    )


def _counts(frame: pl.DataFrame, column: str) -> dict[str, int]:
    if frame.height == 0:
        return {}
    rows = frame.filter(pl.col(column).is_not_null()).group_by(column).len().sort(column)
    return {str(k): int(v) for k, v in rows.iter_rows()}


def admit(
    conn: sa.Connection,
    role_ids: Sequence[str],
    validate: Validator,
    *,
    min_points: int,
    batch_id: str | None = None,
    now: datetime | None = None,
    lock_wait_s: float = DEFAULT_WAIT_S,
) -> AdmissionResult:
    """Admit every staged execution on `conn`'s transaction and return the counts."""
    batch_id = batch_id or f"adm-{uuid.uuid4().hex[:16]}"
    now = now or datetime.now(UTC)
    empty = AdmissionResult(batch_id=batch_id, rows_in=0, admitted=0, pending=0, quarantined=0)
    if not acquire_admission_lock(conn, batch_id, wait_s=lock_wait_s):
        return replace(empty, busy=True)
    staged = stage_candidates(conn, min_points=min_points)
    if staged.height == 0:
        return empty
    failures = validate(staged, role_ids) if staged.height else pl.DataFrame(schema=FAILURE_SCHEMA)
    verdicts = decide(staged, failures, batch_id=batch_id)
    if verdicts.rows_in == 0 and verdicts.revoked == 0:
        # Only re-judged cases, all kept: nothing to write, so no batch row either.
        return empty
    persist(conn, verdicts, batch_id=batch_id, now=now)
    return AdmissionResult(
        batch_id=batch_id,
        rows_in=verdicts.rows_in,
        admitted=verdicts.admitted,
        pending=verdicts.pending,
        quarantined=verdicts.quarantined,
        by_reason=_counts(
            verdicts.quarantine.join(
                verdicts.revocations.select(pl.col("execution_id").alias("subject_id")),
                on="subject_id",
                how="anti",
            ),
            "reason_code",
        ),
        pending_by_reason=_counts(verdicts.cases, "pending_reason"),
        revoked=verdicts.revoked,
        revoked_by_reason=_counts(verdicts.revocations, "reason_code"),
    )
