"""The ledger: the source of truth every later stage reads.

Invariants are declared here so that they live in the database, not only in Python:
foreign keys chain a case to the execution that proves a trade happened, every closed
vocabulary is a CHECK constraint, and a preview's consumption counter is capped at one.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, ClassVar

import sqlalchemy as sa
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from reflexmem.ledger.enums import (
    CaseState,
    Direction,
    Instrument,
    Origin,
    OutcomeClass,
    PendingReason,
    PositionStatus,
    QuarantineReason,
    SubjectKind,
)
from reflexmem.ledger.experience_models import EXPERIENCE_CONSTRAINTS, ExperienceColumns
from reflexmem.ledger.lengths import CODE_CHARS, ID_CHARS, SCENARIO_CHARS

ID = sa.String(ID_CHARS)
CODE = sa.String(CODE_CHARS)
REASON_CHARS = 32
"""Width of a quarantine reason code (migration 0008 widened it from 22)."""
NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def checked(enum: type[StrEnum], name: str, length: int | None = None) -> sa.Enum:
    """A portable enumeration column stored as text and guarded by a named CHECK."""
    return sa.Enum(
        enum,
        name=name,
        native_enum=False,
        create_constraint=True,
        length=length or max(len(m.value) for m in enum),
        values_callable=lambda e: [m.value for m in e],
        validate_strings=True,
    )


class Base(DeclarativeBase):
    """Declarative base with deterministic constraint names (Alembic needs them)."""

    metadata = sa.MetaData(naming_convention=NAMING)
    type_annotation_map: ClassVar[dict[Any, Any]] = {
        datetime: sa.DateTime(timezone=True),
        dict[str, Any]: sa.JSON,
    }


class TradingDecision(Base):
    """What an agent decided, in which role, with the evidence it had at that moment."""

    __tablename__ = "trading_decisions"

    decision_id: Mapped[str] = mapped_column(ID, primary_key=True)
    agent_id: Mapped[str] = mapped_column(ID)
    role_id: Mapped[str] = mapped_column(ID, index=True)
    account: Mapped[str] = mapped_column(ID)
    market: Mapped[str] = mapped_column(CODE)
    symbol: Mapped[str] = mapped_column(CODE)
    direction: Mapped[Direction] = mapped_column(checked(Direction, "direction"))
    decided_at: Mapped[datetime]
    scenario: Mapped[str | None] = mapped_column(sa.String(SCENARIO_CHARS))
    rationale: Mapped[str] = mapped_column(sa.Text, default="")
    evidence: Mapped[Any | None] = mapped_column(sa.JSON)


class TradePreview(Base):
    """A manual preview; consuming it is what turns a decision into a manual trade."""

    __tablename__ = "trade_previews"
    __table_args__ = (
        sa.CheckConstraint("consume_count IN (0, 1)", name="consumed_at_most_once"),
        sa.CheckConstraint(
            "(consume_count = 0 AND consumed_at IS NULL AND consumed_by_decision_id IS NULL)"
            " OR (consume_count = 1 AND consumed_at IS NOT NULL"
            " AND consumed_by_decision_id IS NOT NULL)",
            name="consumption_recorded",
        ),
    )

    preview_id: Mapped[str] = mapped_column(ID, primary_key=True)
    decision_id: Mapped[str] = mapped_column(
        sa.ForeignKey("trading_decisions.decision_id"), index=True
    )
    account: Mapped[str] = mapped_column(ID)
    market: Mapped[str] = mapped_column(CODE)
    symbol: Mapped[str] = mapped_column(CODE)
    direction: Mapped[Direction] = mapped_column(checked(Direction, "direction"))
    created_at: Mapped[datetime]
    consume_count: Mapped[int] = mapped_column(default=0, server_default="0")
    consumed_at: Mapped[datetime | None]
    consumed_by_decision_id: Mapped[str | None] = mapped_column(
        sa.ForeignKey("trading_decisions.decision_id")
    )


class TradeExecution(Base):
    """An order that reached the market; its origin and automation markers decide learnability."""

    __tablename__ = "trade_executions"

    execution_id: Mapped[str] = mapped_column(ID, primary_key=True)
    decision_id: Mapped[str] = mapped_column(
        sa.ForeignKey("trading_decisions.decision_id"), index=True
    )
    preview_id: Mapped[str | None] = mapped_column(
        sa.ForeignKey("trade_previews.preview_id"), index=True
    )
    account: Mapped[str] = mapped_column(ID)
    market: Mapped[str] = mapped_column(CODE)
    symbol: Mapped[str] = mapped_column(CODE)
    direction: Mapped[Direction] = mapped_column(checked(Direction, "direction"))
    instrument: Mapped[Instrument] = mapped_column(checked(Instrument, "instrument"))
    origin: Mapped[Origin] = mapped_column(checked(Origin, "origin"))
    origin_verified: Mapped[bool] = mapped_column(default=False)
    automation_markers: Mapped[Any | None] = mapped_column(sa.JSON)
    executed_at: Mapped[datetime]


class TradeFill(Base):
    """A partial or full fill of an execution."""

    __tablename__ = "trade_fills"

    fill_id: Mapped[str] = mapped_column(ID, primary_key=True)
    execution_id: Mapped[str] = mapped_column(
        sa.ForeignKey("trade_executions.execution_id"), index=True
    )
    quantity: Mapped[float]
    price: Mapped[float]
    fee: Mapped[float] = mapped_column(default=0.0)
    filled_at: Mapped[datetime]


class PositionLifecycle(Base):
    """The position a decision opened, and its settled outcome once closed."""

    __tablename__ = "position_lifecycles"

    position_id: Mapped[str] = mapped_column(ID, primary_key=True)
    decision_id: Mapped[str] = mapped_column(
        sa.ForeignKey("trading_decisions.decision_id"), index=True
    )
    execution_id: Mapped[str | None] = mapped_column(
        sa.ForeignKey("trade_executions.execution_id"), index=True
    )
    """The execution this position belongs to; null: the decision's only position."""
    status: Mapped[PositionStatus] = mapped_column(checked(PositionStatus, "position_status"))
    opened_at: Mapped[datetime]
    settled_at: Mapped[datetime | None]
    entry_price: Mapped[float | None]
    exit_price: Mapped[float | None]
    realized_return: Mapped[float | None]
    evaluation_points: Mapped[int] = mapped_column(default=0)


class EvaluationRun(Base):
    """One versioned evaluation of a decision under a benchmark profile; replays add rows."""

    __tablename__ = "evaluation_runs"
    __table_args__ = (
        sa.Index(
            "uq_evaluation_runs_primary",
            "decision_id",
            "profile",
            unique=True,
            sqlite_where=sa.text("is_primary"),
            postgresql_where=sa.text("is_primary"),
        ),
    )

    run_id: Mapped[str] = mapped_column(ID, primary_key=True)
    decision_id: Mapped[str] = mapped_column(
        sa.ForeignKey("trading_decisions.decision_id"), index=True
    )
    profile: Mapped[str] = mapped_column(sa.String(64))
    profile_version: Mapped[int]
    is_primary: Mapped[bool] = mapped_column(default=False)
    mlflow_run_id: Mapped[str | None] = mapped_column(sa.String(64))
    created_at: Mapped[datetime]


class EvaluationComponent(Base):
    """One factor of an evaluation run with its own quality flags, never folded into a score."""

    __tablename__ = "evaluation_components"

    component_id: Mapped[int] = mapped_column(primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(sa.ForeignKey("evaluation_runs.run_id"), index=True)
    name: Mapped[str] = mapped_column(sa.String(64))
    value: Mapped[float | None]
    missing: Mapped[bool] = mapped_column(default=False)
    quality: Mapped[str] = mapped_column(sa.String(64), default="ok")


class MethodologyObservation(Base):
    """A per-role statistic fed only by primary evaluation runs."""

    __tablename__ = "methodology_observations"

    observation_id: Mapped[int] = mapped_column(primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(sa.ForeignKey("evaluation_runs.run_id"), index=True)
    role_id: Mapped[str] = mapped_column(ID, index=True)
    metric: Mapped[str] = mapped_column(sa.String(64))
    value: Mapped[float]


class RoleCase(Base):
    """A learnable case: it inherits the fact of a trade from its execution, never claims it."""

    __tablename__ = "role_cases"

    case_id: Mapped[str] = mapped_column(sa.String(80), primary_key=True)
    execution_id: Mapped[str] = mapped_column(
        sa.ForeignKey("trade_executions.execution_id"), unique=True
    )
    decision_id: Mapped[str] = mapped_column(
        sa.ForeignKey("trading_decisions.decision_id"), index=True
    )
    role_id: Mapped[str] = mapped_column(ID)
    symbol: Mapped[str] = mapped_column(sa.String(32))
    scenario: Mapped[str | None] = mapped_column(sa.String(64))
    decision_text: Mapped[str] = mapped_column(sa.Text, default="")
    state: Mapped[CaseState] = mapped_column(checked(CaseState, "case_state"))
    pending_reason: Mapped[PendingReason | None] = mapped_column(
        checked(PendingReason, "pending_reason")
    )
    outcome_class: Mapped[OutcomeClass | None] = mapped_column(
        checked(OutcomeClass, "outcome_class")
    )
    lesson: Mapped[str | None] = mapped_column(sa.Text)
    reflection: Mapped[Any | None] = mapped_column(sa.JSON)
    provenance: Mapped[Any | None] = mapped_column(sa.JSON)
    batch_id: Mapped[str] = mapped_column(ID)
    decided_at: Mapped[datetime]
    admitted_at: Mapped[datetime]
    matured_at: Mapped[datetime | None]
    """Valid time of the outcome: the cycle clock from which the case is mature (its
    role's maturation period passed and its position settled), whenever a cycle got
    there; `admitted_at` and the reflection stamp are recorded (wall-clock) times."""

    __table_args__ = (
        sa.Index("ix_role_cases_role_state", "role_id", "state"),
        sa.CheckConstraint(
            "(state = 'pending') = (pending_reason IS NOT NULL)", name="pending_has_reason"
        ),
    )


class Episode(ExperienceColumns, Base):
    """The generic experience ledger: one row per agent step (a decision is an episode).

    The experience contract's columns and checks come from `experience_models`. Every
    reflected role case is one episode of its role's namespace (`case_id`), at position
    `episode_index` of that namespace: the index the learning schedule counts.
    """

    __tablename__ = "episodes"
    __table_args__ = (
        *EXPERIENCE_CONSTRAINTS,
        sa.UniqueConstraint("namespace", "episode_index", name="uq_episodes_namespace"),
    )

    episode_id: Mapped[str] = mapped_column(ID, primary_key=True)
    agent_id: Mapped[str] = mapped_column(ID, index=True)
    parent_id: Mapped[str | None] = mapped_column(sa.ForeignKey("episodes.episode_id"))
    decision_id: Mapped[str | None] = mapped_column(
        sa.ForeignKey("trading_decisions.decision_id"), index=True
    )
    namespace: Mapped[str | None] = mapped_column(sa.String(128))
    episode_index: Mapped[int | None]
    case_id: Mapped[str | None] = mapped_column(sa.ForeignKey("role_cases.case_id"), unique=True)
    quality: Mapped[float | None]
    task_family: Mapped[str] = mapped_column(sa.String(64))
    layer: Mapped[str | None] = mapped_column(sa.String(8))
    outcome: Mapped[float | None]
    payload: Mapped[Any | None] = mapped_column(sa.JSON)
    recorded_at: Mapped[datetime]


class Quarantine(Base):
    """A held-back input row with the expectations it failed; never repaired by hand."""

    __tablename__ = "quarantine"
    __table_args__ = (
        sa.UniqueConstraint("subject_kind", "subject_id", name="uq_quarantine_subject"),
    )

    quarantine_id: Mapped[int] = mapped_column(primary_key=True, autoincrement=True)
    subject_kind: Mapped[SubjectKind] = mapped_column(checked(SubjectKind, "subject_kind"))
    subject_id: Mapped[str] = mapped_column(ID)
    decision_id: Mapped[str | None] = mapped_column(ID, index=True)
    role_id: Mapped[str | None] = mapped_column(ID)
    reason_code: Mapped[QuarantineReason] = mapped_column(
        checked(QuarantineReason, "reason_code", REASON_CHARS), index=True
    )
    failed_expectations: Mapped[str] = mapped_column(sa.Text)
    detail: Mapped[str] = mapped_column(sa.Text, default="")
    batch_id: Mapped[str | None] = mapped_column(ID)
    created_at: Mapped[datetime]


class AdmissionBatch(Base):
    """Conservation record of one admission run: rows in = admitted + pending + quarantined.

    `rows_in` counts the executions judged for the first time; `revoked` counts cases of
    earlier batches that this batch re-judged and revoked (see `case_revocations`).
    """

    __tablename__ = "admission_batches"
    __table_args__ = (
        sa.CheckConstraint("rows_in = admitted + pending + quarantined", name="conservation"),
    )

    batch_id: Mapped[str] = mapped_column(ID, primary_key=True)
    started_at: Mapped[datetime]
    rows_in: Mapped[int]
    admitted: Mapped[int]
    pending: Mapped[int]
    quarantined: Mapped[int]
    revoked: Mapped[int] = mapped_column(default=0, server_default="0")
    suite: Mapped[str] = mapped_column(sa.String(64))


class IngestedFile(Base):
    """Checksum of every file ingested, so that re-ingesting it is a no-op."""

    __tablename__ = "ingested_files"

    sha256: Mapped[str] = mapped_column(sa.String(64), primary_key=True)
    path: Mapped[str] = mapped_column(sa.Text)
    kind: Mapped[str] = mapped_column(sa.String(32))
    rows: Mapped[int]
    ingested_at: Mapped[datetime]
