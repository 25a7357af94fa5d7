"""Write one reflection batch's results back to the ledger, set-based, in one transaction.

The model was asked with no transaction open, so a case may have moved meanwhile (an
admission batch revoked it): only cases still offerable are written, the others are
counted `skipped`, and on PostgreSQL the offerable rows are locked (`FOR UPDATE`) so a
revocation waits for this commit and then wins. A verdict whose lesson addresses the
system (`reflexmem.reflection.screen`) is stored `held` with a `lesson_reviews` row
instead of `reflected`, so it is never recalled until a reviewer accepts it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

import polars as pl
import sqlalchemy as sa

from reflexmem.executor import AuditRecord
from reflexmem.ledger.bulk import bulk_insert
from reflexmem.ledger.enums import CaseState, LessonReviewStatus, PendingReason
from reflexmem.ledger.sqlio import UTC_US, bulk_update, drop_stage, stage
from reflexmem.reflection.screen import addresses_system
from reflexmem.reflection.types import Reflection

OFFERABLE = (
    "(rc.state = 'eligible' OR (rc.state = 'pending' AND rc.pending_reason = 'budget_deferred'))"
)


@dataclass(frozen=True)
class Written:
    """What `apply_results` wrote."""

    reflected: int = 0
    failed: int = 0
    deferred: int = 0
    lessons: int = 0
    held: int = 0
    skipped: int = 0
    by_class: dict[str, int] = field(default_factory=dict)


def still_offerable(conn: sa.Connection, case_ids: Sequence[str]) -> set[str]:
    """Which of `case_ids` are still waiting for reflection (locked on PostgreSQL)."""
    if not case_ids:
        return set()
    name = stage(conn, "_offered_cases", pl.DataFrame({"case_id": list(case_ids)}))
    lock = " FOR UPDATE OF rc" if conn.dialect.name == "postgresql" else ""
    found = conn.execute(
        sa.text(
            f"SELECT rc.case_id FROM role_cases rc JOIN {name} o ON o.case_id = rc.case_id "
            f"WHERE {OFFERABLE}{lock}"
        )
    ).scalars()
    keep = {str(c) for c in found}
    drop_stage(conn, name)
    return keep


def audit_frame(records: Sequence[AuditRecord], batch_id: str, role_id: str) -> pl.DataFrame:
    """Executor audit records of the batch as `executor_audit` rows."""
    return pl.DataFrame(
        {
            "batch_id": [batch_id] * len(records),
            "role_id": [role_id] * len(records),
            "at": pl.Series([r.at for r in records], dtype=UTC_US),
            "caller": [r.caller for r in records],
            "tool": [r.tool for r in records],
            "effects": [json.dumps(list(r.effects)) for r in records],
            "arguments": [json.dumps(r.arguments, default=str) for r in records],
            "outcome": [r.outcome for r in records],
            "reason": [r.reason for r in records],
            "attempts": [r.attempts for r in records],
            "idempotency_key": pl.Series([r.idempotency_key for r in records], dtype=pl.String),
        }
    )


def apply_results(
    conn: sa.Connection,
    *,
    batch_id: str,
    role_id: str,
    results: Sequence[Reflection],
    failures: Sequence[Reflection],
    deferred: Sequence[str],
    records: Sequence[AuditRecord],
) -> Written:
    """Write verdicts, failures, deferrals, held lessons and audit records of one batch."""
    everything = [*results, *failures]
    keep = still_offerable(conn, [r.case_id for r in everything] + list(deferred))
    written = [r for r in everything if r.case_id in keep]
    waiting = [c for c in deferred if c in keep]
    flagged = {r.case_id: addresses_system(r.lesson) for r in written if r.lesson is not None}
    held = {c: m for c, m in flagged.items() if m}

    def state(r: Reflection) -> str:
        return CaseState.HELD.value if r.case_id in held else r.case_state.value

    updates = pl.DataFrame(
        {
            "case_id": [r.case_id for r in written] + waiting,
            "state": [state(r) for r in written] + [CaseState.PENDING.value] * len(waiting),
            "pending_reason": pl.Series(
                [None] * len(written) + [PendingReason.BUDGET_DEFERRED.value] * len(waiting),
                dtype=pl.String,
            ),
            "outcome_class": pl.Series(
                [None if r.outcome_class is None else r.outcome_class.value for r in written]
                + [None] * len(waiting),
                dtype=pl.String,
            ),
            "lesson": pl.Series(
                [r.lesson for r in written] + [None] * len(waiting), dtype=pl.String
            ),
            "reflection": pl.Series(
                [json.dumps(r.to_json()) for r in written] + [None] * len(waiting),
                dtype=pl.String,
            ),
        }
    )
    bulk_update(conn, "role_cases", "case_id", updates, json_columns=("reflection",))
    if held:
        now = datetime.now(UTC)
        bulk_insert(
            conn,
            "lesson_reviews",
            pl.DataFrame(
                {
                    "case_id": list(held),
                    "role_id": [role_id] * len(held),
                    "status": [LessonReviewStatus.HELD.value] * len(held),
                    "matched": ["; ".join(m) for m in held.values()],
                    "held_by_batch_id": [batch_id] * len(held),
                    "held_at": pl.Series([now] * len(held), dtype=UTC_US),
                }
            ),
        )
    bulk_insert(conn, "executor_audit", audit_frame(records, batch_id, role_id))
    ok = [r for r in written if not r.failed]
    by_class: dict[str, int] = {}
    for r in ok:
        by_class[str(r.outcome_class)] = by_class.get(str(r.outcome_class), 0) + 1
    return Written(
        reflected=len(ok),
        failed=len(written) - len(ok),
        deferred=len(waiting),
        lessons=sum(1 for r in ok if r.lesson is not None and r.case_id not in held),
        held=len(held),
        skipped=len(everything) + len(deferred) - len(written) - len(waiting),
        by_class=by_class,
    )
