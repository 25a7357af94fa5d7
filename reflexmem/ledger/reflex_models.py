"""Tables of REFLEX skills, the review queue and the executor's shared state (migration 0006).

* `skills` / `skill_versions`: every field of a skill's contract (docs/design.md §10), one row per
  version, with its lifecycle state; at most one version of a skill is `active` (a
  partial unique index, so two workers cannot both promote).
* `skill_transitions`: every lifecycle move with the evidence that justified it.
* `review_queue`: inputs the router refused to guess at (a new input format, an
  environment change, an unknown task family), one row per distinct cause.
* `tool_calls`: one row per idempotency key; the primary key is what makes a repeated
  call, from any process, return the first result instead of acting twice.
* `rate_buckets`: one token bucket per tool, shared by every worker on the ledger.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from reflexmem.ledger.models import ID, Base, checked
from reflexmem.ledger.reflex_enums import (
    Layer,
    ReviewKind,
    ReviewResolution,
    ReviewStatus,
    SkillState,
    ToolCallStatus,
)


class Skill(Base):
    """A skill's identity: its owner role and task family never change across versions."""

    __tablename__ = "skills"

    skill_id: Mapped[str] = mapped_column(ID, primary_key=True)
    owner: Mapped[str] = mapped_column(ID, index=True)
    task_family: Mapped[str] = mapped_column(ID)
    created_at: Mapped[datetime]


class SkillVersion(Base):
    """One version of a skill with its whole contract and its lifecycle state."""

    __tablename__ = "skill_versions"
    __table_args__ = (
        sa.CheckConstraint("version >= 1", name="version_positive"),
        sa.CheckConstraint(
            "previous_version IS NULL OR previous_version < version", name="previous_is_older"
        ),
        sa.CheckConstraint("quality_floor >= 0 AND quality_floor <= 1", name="quality_floor"),
        sa.CheckConstraint(
            "confidence_floor >= 0 AND confidence_floor <= 1", name="confidence_floor"
        ),
        sa.CheckConstraint("retry_limit >= 0", name="retry_limit"),
        sa.CheckConstraint(
            "rollout_fraction IS NULL OR (rollout_fraction > 0 AND rollout_fraction <= 1)",
            name="rollout_fraction",
        ),
        sa.CheckConstraint(
            "valid_until IS NULL OR valid_from IS NULL OR valid_until > valid_from",
            name="validity_period",
        ),
        sa.ForeignKeyConstraint(
            ["skill_id", "previous_version"],
            ["skill_versions.skill_id", "skill_versions.version"],
            name="fk_skill_versions_previous_skill_versions",
        ),
        sa.Index(
            "uq_skill_versions_one_active",
            "skill_id",
            unique=True,
            sqlite_where=sa.text("state = 'active'"),
            postgresql_where=sa.text("state = 'active'"),
        ),
        sa.Index("ix_skill_versions_family_state", "task_family", "state"),
    )

    skill_id: Mapped[str] = mapped_column(sa.ForeignKey("skills.skill_id"), primary_key=True)
    version: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    owner: Mapped[str] = mapped_column(ID)
    source_experiences: Mapped[Any] = mapped_column(sa.JSON)
    # applicability
    trigger: Mapped[Any] = mapped_column(sa.JSON)
    input_contract: Mapped[Any] = mapped_column(sa.JSON)
    task_family: Mapped[str] = mapped_column(ID)
    environment_version: Mapped[str] = mapped_column(ID)
    valid_from: Mapped[datetime | None]
    valid_until: Mapped[datetime | None]
    # decision and action
    layer: Mapped[Layer] = mapped_column(checked(Layer, "skill_layer"))
    options: Mapped[Any] = mapped_column(sa.JSON)
    argument_schema: Mapped[Any] = mapped_column(sa.JSON)
    procedure: Mapped[Any] = mapped_column(sa.JSON)
    action: Mapped[Any | None] = mapped_column(sa.JSON)
    confidence_floor: Mapped[float]
    # validation evidence
    evaluation_set: Mapped[Any] = mapped_column(sa.JSON)
    counter_examples: Mapped[Any] = mapped_column(sa.JSON)
    quality_floor: Mapped[float]
    post_conditions: Mapped[Any] = mapped_column(sa.JSON)
    # execution bounds
    permissions: Mapped[Any] = mapped_column(sa.JSON)
    budget: Mapped[Any] = mapped_column(sa.JSON)
    retry_limit: Mapped[int]
    idempotency: Mapped[Any] = mapped_column(sa.JSON)
    # way back
    rejection_conditions: Mapped[Any] = mapped_column(sa.JSON)
    escalation_target: Mapped[Layer] = mapped_column(checked(Layer, "escalation_target"))
    previous_version: Mapped[int | None]
    # lifecycle and provenance
    state: Mapped[SkillState] = mapped_column(checked(SkillState, "skill_state"))
    rollout_fraction: Mapped[float | None]
    source_file: Mapped[str] = mapped_column(sa.Text)
    source_yaml: Mapped[str] = mapped_column(sa.Text)
    spec_sha256: Mapped[str] = mapped_column(sa.String(64))
    mlflow_model_version: Mapped[str | None] = mapped_column(sa.String(32))
    created_at: Mapped[datetime]  # the registering cycle's clock: the valid time
    state_changed_at: Mapped[datetime]
    recorded_at: Mapped[datetime | None]  # wall clock of the write (0020)


class SkillTransition(Base):
    """One lifecycle move of a skill version and the evidence that allowed it."""

    __tablename__ = "skill_transitions"
    __table_args__ = (
        sa.ForeignKeyConstraint(
            ["skill_id", "version"],
            ["skill_versions.skill_id", "skill_versions.version"],
            name="fk_skill_transitions_version_skill_versions",
        ),
        sa.Index("ix_skill_transitions_version", "skill_id", "version"),
    )

    transition_id: Mapped[int] = mapped_column(primary_key=True, autoincrement=True)
    skill_id: Mapped[str] = mapped_column(ID)
    version: Mapped[int]
    from_state: Mapped[SkillState | None] = mapped_column(checked(SkillState, "from_state"))
    to_state: Mapped[SkillState] = mapped_column(checked(SkillState, "to_state"))
    evidence: Mapped[Any] = mapped_column(sa.JSON)
    actor: Mapped[str] = mapped_column(ID)
    mlflow_run_id: Mapped[str | None] = mapped_column(sa.String(64))
    at: Mapped[datetime]


class ReviewItem(Base):
    """An input the router would not guess at, waiting for a person's verdict."""

    __tablename__ = "review_queue"
    __table_args__ = (
        sa.UniqueConstraint("kind", "task_family", "fingerprint", name="uq_review_queue_cause"),
        sa.CheckConstraint(
            "(status = 'resolved') = (resolution IS NOT NULL AND resolved_at IS NOT NULL)",
            name="resolved_has_verdict",
        ),
        sa.CheckConstraint("occurrences >= 1", name="occurrences"),
    )

    review_id: Mapped[int] = mapped_column(primary_key=True, autoincrement=True)
    kind: Mapped[ReviewKind] = mapped_column(checked(ReviewKind, "review_kind"))
    task_family: Mapped[str] = mapped_column(ID)
    fingerprint: Mapped[str] = mapped_column(sa.String(64))
    environment_version: Mapped[str | None] = mapped_column(ID)
    detail: Mapped[Any] = mapped_column(sa.JSON)
    first_episode_id: Mapped[str | None] = mapped_column(ID)
    last_episode_id: Mapped[str | None] = mapped_column(ID)
    occurrences: Mapped[int] = mapped_column(default=1)
    status: Mapped[ReviewStatus] = mapped_column(checked(ReviewStatus, "review_status"), index=True)
    resolution: Mapped[ReviewResolution | None] = mapped_column(
        checked(ReviewResolution, "review_resolution")
    )
    resolution_note: Mapped[str | None] = mapped_column(sa.Text)
    resolved_by: Mapped[str | None] = mapped_column(ID)
    first_seen_at: Mapped[datetime]
    last_seen_at: Mapped[datetime]
    resolved_at: Mapped[datetime | None]


class ToolCall(Base):
    """The idempotency ledger: one row per (tool, key), whichever process made the call."""

    __tablename__ = "tool_calls"

    tool: Mapped[str] = mapped_column(sa.String(128), primary_key=True)
    idempotency_key: Mapped[str] = mapped_column(sa.String(128), primary_key=True)
    arguments_sha256: Mapped[str] = mapped_column(sa.String(64))
    arguments: Mapped[Any] = mapped_column(sa.JSON)
    caller: Mapped[str] = mapped_column(ID)
    status: Mapped[ToolCallStatus] = mapped_column(checked(ToolCallStatus, "tool_call_status"))
    result: Mapped[Any | None] = mapped_column(sa.JSON)
    reason: Mapped[str] = mapped_column(sa.Text, default="")
    attempts: Mapped[int] = mapped_column(default=0)
    owner: Mapped[str] = mapped_column(ID)
    started_at: Mapped[datetime]
    finished_at: Mapped[datetime | None]


class RateBucket(Base):
    """A token bucket per tool; `updated_at` is seconds since the epoch of the last take."""

    __tablename__ = "rate_buckets"
    __table_args__ = (
        sa.CheckConstraint("capacity > 0 AND refill_per_s >= 0", name="bucket_shape"),
        sa.CheckConstraint("tokens >= 0 AND tokens <= capacity", name="tokens_in_range"),
    )

    name: Mapped[str] = mapped_column(sa.String(128), primary_key=True)
    capacity: Mapped[float]
    refill_per_s: Mapped[float]
    tokens: Mapped[float]
    updated_at: Mapped[float]
