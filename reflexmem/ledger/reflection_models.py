"""Tables of maturation, evaluation lineage and reflection batches (migration 0003).

`evaluation_runs` (migration 0001) holds one row per run; what it cannot say is which
batch produced a run, what it replayed and who promoted it. Those facts live here so that
a reviewer can walk from an MLflow run to every ledger row it describes and back, and so
that a replay or a promotion is a recorded event rather than an overwrite.

Reflection adds the per-day model budget (persisted so a restart cannot reset the
allowance), the executor's audit of every tool call a reflector attempted, the per-role
lock row and one summary row per reflection batch.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from reflexmem.ledger.models import ID, Base


class EvaluationBatch(Base):
    """One evaluation, replay or promotion batch: the unit MLflow records as one run."""

    __tablename__ = "evaluation_batches"
    __table_args__ = (
        sa.CheckConstraint("kind IN ('evaluate', 'replay', 'promote')", name="batch_kind"),
    )

    batch_id: Mapped[str] = mapped_column(ID, primary_key=True)
    kind: Mapped[str] = mapped_column(sa.String(16))
    profile: Mapped[str] = mapped_column(sa.String(64))
    profile_version: Mapped[int]
    roles: Mapped[Any | None] = mapped_column(sa.JSON)
    n_runs: Mapped[int]
    mlflow_run_id: Mapped[str | None] = mapped_column(sa.String(64))
    created_at: Mapped[datetime]


class EvaluationRunLineage(Base):
    """Which batch made a run, for which case and role, and which run it replayed."""

    __tablename__ = "evaluation_run_lineage"

    run_id: Mapped[str] = mapped_column(
        sa.ForeignKey("evaluation_runs.run_id", ondelete="CASCADE"), primary_key=True
    )
    batch_id: Mapped[str] = mapped_column(ID, index=True)
    case_id: Mapped[str | None] = mapped_column(sa.String(80))
    role_id: Mapped[str] = mapped_column(ID, index=True)
    replay_of: Mapped[str | None] = mapped_column(ID)


class EvaluationPromotion(Base):
    """An explicit promotion: the run made primary and the primary it replaced, if any."""

    __tablename__ = "evaluation_promotions"

    promotion_id: Mapped[int] = mapped_column(primary_key=True, autoincrement=True)
    batch_id: Mapped[str] = mapped_column(ID, index=True)
    decision_id: Mapped[str] = mapped_column(ID, index=True)
    profile: Mapped[str] = mapped_column(sa.String(64))
    run_id: Mapped[str] = mapped_column(ID)
    previous_run_id: Mapped[str | None] = mapped_column(ID)
    promoted_at: Mapped[datetime]


class ReflectionBudgetUsage(Base):
    """Model calls and tokens charged per UTC day; reservations included until settled."""

    __tablename__ = "reflection_budget_usage"

    day: Mapped[str] = mapped_column(sa.String(10), primary_key=True)
    calls: Mapped[int] = mapped_column(default=0)
    tokens: Mapped[int] = mapped_column(default=0)
    updated_at: Mapped[datetime]


class ReflectionBatch(Base):
    """Counts of one role's reflection batch; a re-run after a crash adds a new row."""

    __tablename__ = "reflection_batches"

    batch_id: Mapped[str] = mapped_column(ID, primary_key=True)
    role_id: Mapped[str] = mapped_column(ID, index=True)
    reflector: Mapped[str] = mapped_column(sa.String(32))
    offered: Mapped[int]
    reflected: Mapped[int]
    failed: Mapped[int]
    deferred: Mapped[int]
    lessons: Mapped[int]
    held: Mapped[int] = mapped_column(default=0, server_default="0")
    """Lessons held for review because they address the system (`lesson_reviews`)."""
    skipped: Mapped[int] = mapped_column(default=0, server_default="0")
    """Cases that moved (e.g. were revoked) while the reflector was asked: not written."""
    model_calls: Mapped[int]
    tokens: Mapped[int]
    started_at: Mapped[datetime]
    finished_at: Mapped[datetime]
    mlflow_run_id: Mapped[str | None] = mapped_column(sa.String(64))


class ReflectionBatchCase(Base):
    """The reflection batch whose verdict a case carries (migration 0010): lineage only."""

    __tablename__ = "reflection_batch_cases"

    case_id: Mapped[str] = mapped_column(
        sa.String(80), sa.ForeignKey("role_cases.case_id", ondelete="CASCADE"), primary_key=True
    )
    batch_id: Mapped[str] = mapped_column(sa.ForeignKey("reflection_batches.batch_id"), index=True)


class ExecutorAudit(Base):
    """One tool-call attempt seen by the executor during a reflection batch."""

    __tablename__ = "executor_audit"

    audit_id: Mapped[int] = mapped_column(primary_key=True, autoincrement=True)
    batch_id: Mapped[str] = mapped_column(ID, index=True)
    role_id: Mapped[str | None] = mapped_column(ID)
    at: Mapped[datetime]
    caller: Mapped[str] = mapped_column(sa.String(64))
    tool: Mapped[str] = mapped_column(sa.String(128))
    effects: Mapped[Any | None] = mapped_column(sa.JSON)
    arguments: Mapped[Any | None] = mapped_column(sa.JSON)
    outcome: Mapped[str] = mapped_column(sa.String(16))
    reason: Mapped[str] = mapped_column(sa.Text, default="")
    attempts: Mapped[int] = mapped_column(default=0)
    idempotency_key: Mapped[str | None] = mapped_column(sa.String(128))


class ReflectionRoleLock(Base):
    """The row a reflection batch writes first; on SQLite that write takes the lock."""

    __tablename__ = "reflection_role_locks"

    role_id: Mapped[str] = mapped_column(ID, primary_key=True)
    holder: Mapped[str] = mapped_column(ID)
    acquired_at: Mapped[datetime]
