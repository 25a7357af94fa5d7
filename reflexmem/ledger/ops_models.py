"""Operations tables (migrations 0014_ops, 0016_backfill): what the scheduler did or could not.

`flow_failures` holds one row per flow run that ended Failed or Crashed after its
retries, written by the flows' failure hooks: which flow and deployment, the Prefect
flow run, the final state and its (redacted) message. Doctor and audit read it beside
the Prefect server's own view, so a failure is on record even when the server that
scheduled the run is gone.

`backfill_clocks` holds one row per clock a backfill finished (`reflexmem backfill`):
the backfill's key (its range and step) and the cycle clock. Re-running the same
backfill skips the clocks on record, so a backfill that stopped part way resumes.
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from reflexmem.ledger.models import Base

MESSAGE_CHARS = 4000
"""Longest failure message kept (a traceback's last lines; the rest stays in Prefect)."""


class FlowFailure(Base):
    """One flow run that failed or crashed for good."""

    __tablename__ = "flow_failures"
    __table_args__ = (sa.Index("ix_flow_failures_flow_at", "flow_name", "at"),)

    failure_id: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=True)
    flow_name: Mapped[str] = mapped_column(sa.String(128))
    deployment: Mapped[str | None] = mapped_column(sa.String(128), nullable=True)
    flow_run_id: Mapped[str] = mapped_column(sa.String(64))
    flow_run_name: Mapped[str | None] = mapped_column(sa.String(128), nullable=True)
    state: Mapped[str] = mapped_column(sa.String(32))
    message: Mapped[str | None] = mapped_column(sa.String(MESSAGE_CHARS), nullable=True)
    at: Mapped[datetime] = mapped_column(sa.DateTime(timezone=True))


def record_failure(
    conn: sa.Connection,
    *,
    flow_name: str,
    deployment: str | None,
    flow_run_id: str,
    flow_run_name: str | None,
    state: str,
    message: str | None,
    at: datetime,
) -> int:
    """Insert one failure row; returns its ID."""
    text = None if message is None else message[-MESSAGE_CHARS:]
    result = conn.execute(
        sa.insert(FlowFailure)
        .values(
            flow_name=flow_name,
            deployment=deployment,
            flow_run_id=flow_run_id,
            flow_run_name=flow_run_name,
            state=state,
            message=text,
            at=at,
        )
        .returning(FlowFailure.failure_id)
    )
    return int(result.scalar_one())


class BackfillClock(Base):
    """One cycle clock a backfill has finished."""

    __tablename__ = "backfill_clocks"

    backfill_key: Mapped[str] = mapped_column(sa.String(64), primary_key=True)
    as_of: Mapped[datetime] = mapped_column(sa.DateTime(timezone=True), primary_key=True)
    finished_at: Mapped[datetime] = mapped_column(sa.DateTime(timezone=True))
