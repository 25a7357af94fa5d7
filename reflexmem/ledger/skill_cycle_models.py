"""Tables of the skill learning cycle (migration 0012): where skills came from, what was checked.

* `skill_sources`: one row per source experience of a generated skill version: the
  episode, its role case and its trading decision. It makes a skill version findable
  from a trade (decision -> case -> episode -> the versions learned from it), beside
  the check episodes that pin the versions that judged the trade.
* `skill_checks`: every evaluation the cycle made (independent evaluation, replay,
  shadow, rollout, sample audit, drift, revalidation), whether or not it moved the
  version, with its verdict, figures and MLflow run; and one `gate` row per run of the
  pre-decision checks, whose `window_through` is the clock up to which decisions were
  checked (the next run starts after it, so no decision is checked twice).
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from reflexmem.ledger.models import ID, Base, checked


class CheckKind(StrEnum):
    """What a `skill_checks` row records."""

    GATE = "gate"  # a run of the pre-decision checks over a window of decisions
    EVALUATION = "evaluation"
    REPLAY = "replay"
    SHADOW = "shadow"  # shadow comparison and limited rollout, judged together
    AUDIT = "audit"  # sample audit and drift detection of an active version
    REVALIDATION = "revalidation"


class SkillSource(Base):
    """One experience a skill version was generated from."""

    __tablename__ = "skill_sources"
    __table_args__ = (
        sa.ForeignKeyConstraint(
            ["skill_id", "version"],
            ["skill_versions.skill_id", "skill_versions.version"],
            name="fk_skill_sources_version_skill_versions",
        ),
    )

    skill_id: Mapped[str] = mapped_column(ID, primary_key=True)
    version: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    episode_id: Mapped[str] = mapped_column(ID, primary_key=True, index=True)
    case_id: Mapped[str | None] = mapped_column(sa.String(80), index=True)
    decision_id: Mapped[str | None] = mapped_column(ID, index=True)
    pattern: Mapped[str | None] = mapped_column(sa.String(64))


class SkillCheck(Base):
    """One evaluation of a skill version, or one run of the pre-decision checks."""

    __tablename__ = "skill_checks"
    __table_args__ = (
        sa.Index("ix_skill_checks_version", "skill_id", "version"),
        sa.Index("ix_skill_checks_kind_family", "kind", "task_family"),
    )

    check_id: Mapped[int] = mapped_column(primary_key=True, autoincrement=True)
    kind: Mapped[CheckKind] = mapped_column(checked(CheckKind, "check_kind"))
    task_family: Mapped[str] = mapped_column(ID)
    skill_id: Mapped[str | None] = mapped_column(ID)
    version: Mapped[int | None]
    window_after: Mapped[datetime | None]
    window_through: Mapped[datetime | None]
    passed: Mapped[bool | None]
    moved_to: Mapped[str | None] = mapped_column(sa.String(16))
    metrics: Mapped[Any | None] = mapped_column(sa.JSON)
    detail: Mapped[Any | None] = mapped_column(sa.JSON)
    mlflow_run_id: Mapped[str | None] = mapped_column(sa.String(64))
    at: Mapped[datetime]
