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

from reflexmem.admission.decide import Verdicts, decide
from reflexmem.admission.lock import DEFAULT_WAIT_S, acquire_admission_lock
from reflexmem.admission.stage import staged_chunks
from reflexmem.ledger.bulk import bulk_insert
from reflexmem.ledger.models import AdmissionBatch
from reflexmem.ledger.sqlio import postgres_settings

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


BY_KEY_ONLY = {"enable_hashjoin": "off", "enable_mergejoin": "off"}
"""PostgreSQL's planner while a chunk's cases are written: no hash or merge joins.

The insert joins a chunk's verdicts (at most `CHUNK_ROWS`) to executions and decisions
on their primary keys. Priced with its default random-page cost, the planner hashed
full scans of both tables instead: O(N) per chunk. At 1e6 executions that was 1.6-2.0 s
of every chunk's 3.5 s; looked up by key it is 1.1-1.6 s, about what the one chunk of
a 1e5 batch costs (1.15 s). An index lookup per verdict is never worse than linear.
"""

CHUNK_ROWS = 100_000
"""Executions staged, validated and written at a time: memory stays flat in N."""


def persist(conn: sa.Connection, verdicts: Verdicts, *, batch_id: str, now: datetime) -> None:
    """Write one chunk's role cases, revocations and quarantine rows."""
    conn.execute(sa.text("DROP TABLE IF EXISTS admit_verdicts"))
    conn.execute(
        sa.text(
            "CREATE TEMPORARY TABLE admit_verdicts (case_id VARCHAR(80), execution_id "
            "VARCHAR(64), batch_id VARCHAR(64), state VARCHAR(32), pending_reason VARCHAR(32),"
            " provenance TEXT)"
        )
    )
    bulk_insert(conn, "admit_verdicts", verdicts.cases)
    pg = conn.dialect.name == "postgresql"
    provenance = "CAST(c.provenance AS JSON)" if pg else "c.provenance"
    with postgres_settings(conn, **BY_KEY_ONLY):
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


@dataclass
class _Totals:
    """What the chunks of one batch wrote, added up."""

    rows_in: int = 0
    admitted: int = 0
    pending: int = 0
    quarantined: int = 0
    revoked: int = 0
    by_reason: dict[str, int] = field(default_factory=dict)
    pending_by_reason: dict[str, int] = field(default_factory=dict)
    revoked_by_reason: dict[str, int] = field(default_factory=dict)

    def add(self, v: Verdicts) -> None:
        self.rows_in += v.rows_in
        self.admitted += v.admitted
        self.pending += v.pending
        self.quarantined += v.quarantined
        self.revoked += v.revoked
        first_time = v.quarantine.join(
            v.revocations.select(pl.col("execution_id").alias("subject_id")),
            on="subject_id",
            how="anti",
        )
        for into, frame, column in (
            (self.by_reason, first_time, "reason_code"),
            (self.pending_by_reason, v.cases, "pending_reason"),
            (self.revoked_by_reason, v.revocations, "reason_code"),
        ):
            for key, n in _counts(frame, column).items():
                into[key] = into.get(key, 0) + n


def record_batch(conn: sa.Connection, t: _Totals, *, batch_id: str, now: datetime) -> None:
    """The batch's conservation record: rows_in = admitted + pending + quarantined (CHECK)."""
    conn.execute(
        sa.insert(AdmissionBatch).values(
            batch_id=batch_id,
            started_at=now,
            rows_in=t.rows_in,
            admitted=t.admitted,
            pending=t.pending,
            quarantined=t.quarantined,
            revoked=t.revoked,
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
    chunk_rows: int = CHUNK_ROWS,
) -> AdmissionResult:
    """Admit every staged execution on `conn`'s transaction and return the counts.

    The batch is staged once (`staged_chunks`); its executions are validated, decided
    and written in key ranges of `chunk_rows` executions, in execution-ID order, inside
    the one transaction and under the one lock: the batch is still all or nothing, and
    its memory does not grow with the number of executions.
    """
    batch_id = batch_id or f"adm-{uuid.uuid4().hex[:16]}"
    now = now or datetime.now(UTC)
    empty = AdmissionResult(batch_id=batch_id, rows_in=0, admitted=0, pending=0, quarantined=0)
    if not acquire_admission_lock(conn, batch_id, wait_s=lock_wait_s):
        return replace(empty, busy=True)
    totals = _Totals()
    for staged in staged_chunks(conn, min_points=min_points, chunk_rows=chunk_rows):
        if staged.height:
            failures = validate(staged, role_ids)
            verdicts = decide(staged, failures, batch_id=batch_id)
            if verdicts.rows_in or verdicts.revoked:
                persist(conn, verdicts, batch_id=batch_id, now=now)
                totals.add(verdicts)
    if totals.rows_in == 0 and totals.revoked == 0:
        # Nothing new, or only re-judged cases all kept: nothing written, no batch row.
        return empty
    record_batch(conn, totals, batch_id=batch_id, now=now)
    return AdmissionResult(
        batch_id=batch_id,
        rows_in=totals.rows_in,
        admitted=totals.admitted,
        pending=totals.pending,
        quarantined=totals.quarantined,
        by_reason=dict(sorted(totals.by_reason.items())),
        pending_by_reason=dict(sorted(totals.pending_by_reason.items())),
        revoked=totals.revoked,
        revoked_by_reason=dict(sorted(totals.revoked_by_reason.items())),
    )
