"""Read-only health queries for `doctor` and `audit`: stale, failed, deferred, under review.

A pending case is *stale* when its decision is older than twice its role's maturation
period: by then the outcome should have settled and the case matured, so something
upstream (prices, settlement, the schedule) is stuck. The per-role periods come from
the registry; the comparison is one SQL expression, never a loop over cases.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa

from reflexmem.ledger.enums import CaseState, PendingReason, SubjectKind
from reflexmem.ledger.models import Quarantine, RoleCase
from reflexmem.ledger.reflex_models import ReviewItem
from reflexmem.ledger.safety_models import LessonReview

STALE_FACTOR = 2
"""A pending case is stale after this many maturation periods (docs/design.md §13: twice)."""


def _stale_cutoff(maturation_days: Mapping[str, int], now: datetime) -> sa.ColumnElement[Any]:
    """Per row: the decision time before which a pending case of its role is stale."""
    whens = [
        (RoleCase.role_id == role, now - timedelta(days=STALE_FACTOR * days))
        for role, days in maturation_days.items()
    ]
    if not whens:
        return sa.literal(None, sa.DateTime(timezone=True))
    return sa.case(*whens, else_=None)


def stale_condition(maturation_days: Mapping[str, int], now: datetime) -> sa.ColumnElement[bool]:
    """True for pending cases older than twice their role's maturation period."""
    return sa.and_(
        RoleCase.state == CaseState.PENDING,
        RoleCase.decided_at < _stale_cutoff(maturation_days, now),
    )


@dataclass(frozen=True)
class Health:
    """The counts the doctor judges."""

    stale_pending: int
    failed_reflections: int
    deferred_reflections: int
    held_lessons: int
    open_reviews: int
    legacy_quarantined: int


def health_counts(conn: sa.Connection, maturation_days: Mapping[str, int], now: datetime) -> Health:
    """Stale pending cases, failed and deferred reflections, review queues."""

    def count(*where: sa.ColumnElement[bool]) -> int:
        q = sa.select(sa.func.count()).select_from(RoleCase).where(*where)
        return int(conn.execute(q).scalar_one())

    held = conn.execute(
        sa.select(sa.func.count()).select_from(LessonReview).where(LessonReview.status == "held")
    ).scalar_one()
    reviews = conn.execute(
        sa.select(sa.func.count()).select_from(ReviewItem).where(ReviewItem.status == "open")
    ).scalar_one()
    legacy = conn.execute(
        sa.select(sa.func.count())
        .select_from(Quarantine)
        .where(Quarantine.subject_kind == SubjectKind.LEGACY_ROW)
    ).scalar_one()
    return Health(
        stale_pending=count(stale_condition(maturation_days, now)),
        failed_reflections=count(RoleCase.state == CaseState.REFLECTION_FAILED),
        deferred_reflections=count(
            RoleCase.state == CaseState.PENDING,
            RoleCase.pending_reason == PendingReason.BUDGET_DEFERRED,
        ),
        held_lessons=int(held),
        open_reviews=int(reviews),
        legacy_quarantined=int(legacy),
    )


AUDIT_STATES = (*(s.value for s in CaseState), "stale", "quarantined")


def audit_rows(
    conn: sa.Connection,
    maturation_days: Mapping[str, int],
    now: datetime,
    *,
    role: str | None = None,
    state: str | None = None,
    since: datetime | None = None,
    limit: int = 1000,
) -> list[dict[str, Any]]:
    """One row per case (or quarantined execution) matching the filters, newest first.

    `state` is a case state, `stale` (pending past twice the maturation period) or
    `quarantined` (held-back executions and legacy rows, with their reason).
    """
    rows: list[dict[str, Any]] = []
    if state != "quarantined":
        stale = stale_condition(maturation_days, now)
        q = sa.select(
            RoleCase.case_id,
            RoleCase.role_id,
            RoleCase.state,
            RoleCase.pending_reason,
            RoleCase.outcome_class,
            RoleCase.decision_id,
            RoleCase.execution_id,
            RoleCase.decided_at,
            RoleCase.admitted_at,
            sa.case((stale, True), else_=False).label("stale"),
        )
        if role:
            q = q.where(RoleCase.role_id == role)
        if state == "stale":
            q = q.where(stale)
        elif state:
            q = q.where(RoleCase.state == state)
        if since:
            q = q.where(RoleCase.decided_at >= since)
        q = q.order_by(RoleCase.decided_at.desc(), RoleCase.case_id).limit(limit)
        for r in conn.execute(q).mappings():
            row = dict(r)
            row["kind"] = "case"
            row["stale"] = bool(row["stale"])
            rows.append(row)
    if state in (None, "quarantined"):
        q2 = sa.select(
            Quarantine.subject_kind,
            Quarantine.subject_id,
            Quarantine.role_id,
            Quarantine.reason_code,
            Quarantine.decision_id,
            Quarantine.created_at,
        )
        if role:
            q2 = q2.where(Quarantine.role_id == role)
        if since:
            q2 = q2.where(Quarantine.created_at >= since)
        q2 = q2.order_by(Quarantine.created_at.desc(), Quarantine.subject_id).limit(limit)
        rows.extend(
            {**dict(r), "kind": "quarantined", "state": "quarantined"}
            for r in conn.execute(q2).mappings()
        )
    return rows[:limit]
