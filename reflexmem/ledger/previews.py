"""Exactly-once consumption of a manual preview.

The conditional UPDATE is the arbiter: under concurrency the database serialises the
writers on the row, and only the first sees `consume_count = 0`. The CHECK constraint
on the table backs it up for any writer that bypasses this function.
"""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa

from reflexmem.ledger.enums import QuarantineReason, SubjectKind
from reflexmem.ledger.models import Quarantine, TradePreview, TradingDecision


class PreviewError(RuntimeError):
    """A preview cannot be consumed."""


class PreviewNotFound(PreviewError):
    """No preview has that ID."""


class PreviewAlreadyConsumed(PreviewError):
    """The preview was consumed before; a second consumption is refused."""


class DecisionNotFound(PreviewError):
    """The consuming decision is not in the ledger."""


def consume_preview(
    conn: sa.Connection, preview_id: str, decision_id: str, *, now: datetime | None = None
) -> None:
    """Mark the preview consumed by `decision_id`, or raise why it cannot be."""
    exists = conn.execute(
        sa.select(TradePreview.preview_id).where(TradePreview.preview_id == preview_id)
    ).first()
    if exists is None:
        raise PreviewNotFound(f"preview {preview_id!r} does not exist")
    known = conn.execute(
        sa.select(TradingDecision.decision_id).where(TradingDecision.decision_id == decision_id)
    ).first()
    if known is None:
        raise DecisionNotFound(f"decision {decision_id!r} does not exist")
    done = conn.execute(
        sa.update(TradePreview)
        .where(TradePreview.preview_id == preview_id, TradePreview.consume_count == 0)
        .values(
            consume_count=TradePreview.consume_count + 1,
            consumed_at=now or datetime.now(UTC),
            consumed_by_decision_id=decision_id,
        )
    )
    if done.rowcount == 1:
        return
    owner = conn.execute(
        sa.select(TradePreview.consumed_by_decision_id).where(TradePreview.preview_id == preview_id)
    ).scalar()
    raise PreviewAlreadyConsumed(
        f"preview {preview_id!r} is already consumed (by decision {owner!r}); "
        f"decision {decision_id!r} cannot consume it again"
    )


def record_refused_consumption(
    conn: sa.Connection,
    attempt_id: str,
    preview_id: str,
    decision_id: str,
    reason: str,
    code: QuarantineReason = QuarantineReason.PREVIEW_DOUBLE_CONSUME,
) -> None:
    """Keep a refused consumption attempt in quarantine, so that nothing is lost."""
    conn.execute(
        sa.insert(Quarantine).values(
            subject_kind=SubjectKind.PREVIEW_CONSUMPTION,
            subject_id=attempt_id,
            decision_id=decision_id,
            reason_code=code,
            failed_expectations="preview_consumed_once",
            detail=f"preview={preview_id}: {reason}",
            created_at=datetime.now(UTC),
        )
    )
