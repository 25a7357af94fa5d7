"""Review of held lessons: list them, accept one (it becomes recallable), or reject it.

A reflection batch holds a lesson that addresses the system (`screen.addresses_system`):
the case is stored `held` with its class and lesson, and a `lesson_reviews` row says
what the screen matched. Nothing recalls, records or distils a held case. A reviewer
then decides, once:

* accept: the case becomes `reflected` (the reflection-stamp trigger dates it now, so a
  recall "as of" an earlier time still does not see it) and the review row is closed;
* reject: the case becomes `rejected`, kept for audit only, never recalled or learned.

Both are conditional updates on the case still being `held`, so two reviewers racing
cannot both decide, and a decided review cannot be decided again.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import sqlalchemy as sa

from reflexmem.ledger.enums import CaseState, LessonReviewStatus
from reflexmem.ledger.models import RoleCase
from reflexmem.ledger.safety_models import LessonReview


class ReviewError(RuntimeError):
    """The case has no held lesson to decide (unknown, or decided already)."""


@dataclass(frozen=True)
class HeldLesson:
    """One lesson waiting for review."""

    case_id: str
    role_id: str
    outcome_class: str | None
    lesson: str | None
    matched: str
    held_by_batch_id: str
    held_at: datetime


def held_lessons(conn: sa.Connection, role_id: str | None = None) -> list[HeldLesson]:
    """Every lesson still held, oldest first (optionally of one role)."""
    stmt = (
        sa.select(
            LessonReview.case_id,
            LessonReview.role_id,
            RoleCase.outcome_class,
            RoleCase.lesson,
            LessonReview.matched,
            LessonReview.held_by_batch_id,
            LessonReview.held_at,
        )
        .join(RoleCase, RoleCase.case_id == LessonReview.case_id)
        .where(LessonReview.status == LessonReviewStatus.HELD, RoleCase.state == CaseState.HELD)
        .order_by(LessonReview.held_at, LessonReview.case_id)
    )
    if role_id is not None:
        stmt = stmt.where(LessonReview.role_id == role_id)
    return [
        HeldLesson(
            case_id=r.case_id,
            role_id=r.role_id,
            outcome_class=None if r.outcome_class is None else str(r.outcome_class),
            lesson=r.lesson,
            matched=r.matched,
            held_by_batch_id=r.held_by_batch_id,
            held_at=r.held_at,
        )
        for r in conn.execute(stmt)
    ]


def decide_lesson(
    conn: sa.Connection,
    case_id: str,
    *,
    accept: bool,
    reviewer: str,
    note: str | None = None,
    now: datetime | None = None,
) -> CaseState:
    """Accept or reject a held lesson; returns the case's new state."""
    if not reviewer.strip():
        raise ReviewError("a review needs the reviewer's name")
    now = now or datetime.now(UTC)
    state = CaseState.REFLECTED if accept else CaseState.REJECTED
    moved = conn.execute(
        sa.update(RoleCase)
        .where(RoleCase.case_id == case_id, RoleCase.state == CaseState.HELD)
        .values(state=state)
    )
    if moved.rowcount != 1:
        raise ReviewError(f"case {case_id!r} has no held lesson (unknown or decided already)")
    conn.execute(
        sa.update(LessonReview)
        .where(LessonReview.case_id == case_id, LessonReview.status == LessonReviewStatus.HELD)
        .values(
            status=LessonReviewStatus.ACCEPTED if accept else LessonReviewStatus.REJECTED,
            decided_by=reviewer,
            note=note,
            decided_at=now,
        )
    )
    return state
