"""Read-only summaries of the ledger for `doctor` and the demo."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import InstrumentedAttribute

from reflexmem.ledger.models import AdmissionBatch, Quarantine, RoleCase, TradeExecution


@dataclass(frozen=True)
class LedgerCounts:
    """Cases by state, pending cases by reason, quarantine by reason, conservation."""

    executions: int
    cases_by_state: dict[str, int]
    pending_by_reason: dict[str, int]
    quarantined_by_reason: dict[str, int]
    unaccounted_executions: int
    batches_violating_conservation: int


def _grouped(
    conn: sa.Connection, column: InstrumentedAttribute[Any], *where: sa.ColumnElement[bool]
) -> dict[str, int]:
    rows = conn.execute(
        sa.select(column, sa.func.count()).where(*where).group_by(column).order_by(column)
    )
    return {str(k): int(v) for k, v in rows}


def ledger_counts(conn: sa.Connection) -> LedgerCounts:
    """Counts the doctor reports; two of them must be zero in a healthy store."""
    executions = conn.execute(sa.select(sa.func.count()).select_from(TradeExecution)).scalar_one()
    # A revoked case's execution has both a case and a quarantine row: count it once.
    accounted = sa.union(
        sa.select(RoleCase.execution_id.label("eid")),
        sa.select(Quarantine.subject_id.label("eid")).where(Quarantine.subject_kind == "execution"),
    ).subquery()
    accounted_n = conn.execute(sa.select(sa.func.count()).select_from(accounted)).scalar_one()
    violating = conn.execute(
        sa.select(sa.func.count())
        .select_from(AdmissionBatch)
        .where(
            AdmissionBatch.rows_in
            != AdmissionBatch.admitted + AdmissionBatch.pending + AdmissionBatch.quarantined
        )
    ).scalar_one()
    return LedgerCounts(
        executions=int(executions),
        cases_by_state=_grouped(conn, RoleCase.state),
        pending_by_reason=_grouped(conn, RoleCase.pending_reason, RoleCase.state == "pending"),
        quarantined_by_reason=_grouped(conn, Quarantine.reason_code),
        unaccounted_executions=int(executions) - int(accounted_n),
        batches_violating_conservation=int(violating),
    )
