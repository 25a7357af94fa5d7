"""Ledger tables of the fail-closed rules: revocations, lesson reviews, the admission lock.

* `case_revocations`: one row per admitted case a later admission batch took back (its
  preview was claimed again, its position became ambiguous, its settlement contradicts
  itself). The case stays in `role_cases` in state `revoked` and its execution gets a
  quarantine row; this row says which batch admitted it and which batch revoked it.
* `lesson_reviews`: a lesson that addresses the system (admission, permissions, rules,
  tools) instead of the trade is held (case state `held`) until a reviewer accepts or
  rejects it; the row keeps what the screen matched and who decided.
* `admission_locks`: the row an admission batch upserts first. On SQLite that statement
  takes the database's write lock, which serialises admission batches; on PostgreSQL
  the batch first takes an advisory transaction lock and the row only names the holder.
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from reflexmem.ledger.enums import LessonReviewStatus, QuarantineReason
from reflexmem.ledger.models import ID, REASON_CHARS, Base, checked


class CaseRevocation(Base):
    """An admitted case revoked by a later admission batch; the audit of that decision."""

    __tablename__ = "case_revocations"

    case_id: Mapped[str] = mapped_column(sa.ForeignKey("role_cases.case_id"), primary_key=True)
    execution_id: Mapped[str] = mapped_column(ID, index=True)
    reason_code: Mapped[QuarantineReason] = mapped_column(
        checked(QuarantineReason, "revocation_reason", REASON_CHARS)
    )
    failed_expectations: Mapped[str] = mapped_column(sa.Text)
    previous_state: Mapped[str] = mapped_column(sa.String(32))
    admitted_batch_id: Mapped[str] = mapped_column(ID)
    revoked_by_batch_id: Mapped[str] = mapped_column(ID, index=True)
    detail: Mapped[str] = mapped_column(sa.Text, default="")
    revoked_at: Mapped[datetime]


class LessonReview(Base):
    """A lesson held because it addresses the system, and the reviewer's decision."""

    __tablename__ = "lesson_reviews"

    case_id: Mapped[str] = mapped_column(sa.ForeignKey("role_cases.case_id"), primary_key=True)
    role_id: Mapped[str] = mapped_column(ID, index=True)
    status: Mapped[LessonReviewStatus] = mapped_column(
        checked(LessonReviewStatus, "lesson_review_status")
    )
    matched: Mapped[str] = mapped_column(sa.Text)
    """What the screen found (the rule names and the matched words)."""
    held_by_batch_id: Mapped[str] = mapped_column(ID)
    decided_by: Mapped[str | None] = mapped_column(sa.String(128))
    note: Mapped[str | None] = mapped_column(sa.Text)
    held_at: Mapped[datetime]
    decided_at: Mapped[datetime | None]


class AdmissionLock(Base):
    """The admission lock's row: the statement that serialises batches on SQLite."""

    __tablename__ = "admission_locks"

    name: Mapped[str] = mapped_column(sa.String(32), primary_key=True)
    holder: Mapped[str] = mapped_column(ID)
    acquired_at: Mapped[datetime]
