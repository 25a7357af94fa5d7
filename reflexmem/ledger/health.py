"""Read-only health queries for `doctor` and `audit`: stale, failed, deferred, under review.

A pending case is *stale* when its decision is older than twice its role's maturation
period (*overdue*: one SQL expression over the registry's per-role periods, never a loop
over cases) and its symbol already has twice its role's outcome horizon in bars after
the decision: by then the outcome should have settled and the case matured, so
something upstream (settlement, the schedule) is stuck. A case pending only because its
bars have not arrived yet is not stale, and neither is one pending for
`insufficient_data`: its position settled with fewer bars in its window than the
profile needs, which no later bar can change; it is counted apart as *unmeasurable*.
The bar count needs the price source, which this module does not read: callers pass a
`StaleJudge` over the overdue cases (`reflexmem.maturation.stale.stale_judge`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl
import sqlalchemy as sa

from reflexmem.ledger.enums import CaseState, PendingReason, SubjectKind
from reflexmem.ledger.models import Quarantine, RoleCase
from reflexmem.ledger.reflex_models import ReviewItem
from reflexmem.ledger.safety_models import LessonReview

STALE_FACTOR = 2
"""A pending case is stale after this many maturation periods and outcome horizons
(docs/design.md §13: twice)."""

StaleJudge = Callable[[pl.DataFrame], npt.NDArray[np.bool_]]
"""Per overdue case (a frame of case_id, role_id, symbol, decided_at UTC): is it stale?"""


def _stale_cutoff(maturation_days: Mapping[str, int], now: datetime) -> sa.ColumnElement[Any]:
    """Per row: the decision time before which a pending case of its role is stale."""
    whens = [
        (RoleCase.role_id == role, now - timedelta(days=STALE_FACTOR * days))
        for role, days in maturation_days.items()
    ]
    if not whens:
        return sa.literal(None, sa.DateTime(timezone=True))
    return sa.case(*whens, else_=None)


def overdue_condition(maturation_days: Mapping[str, int], now: datetime) -> sa.ColumnElement[bool]:
    """True for pending cases older than twice their role's maturation period."""
    return sa.and_(
        RoleCase.state == CaseState.PENDING,
        RoleCase.decided_at < _stale_cutoff(maturation_days, now),
    )


def stale_case_ids(
    conn: sa.Connection,
    maturation_days: Mapping[str, int],
    now: datetime,
    judge: StaleJudge,
    *where: sa.ColumnElement[bool],
) -> set[str]:
    """The overdue cases (matching `where`) that `judge` calls stale, by one SELECT."""
    q = sa.select(RoleCase.case_id, RoleCase.role_id, RoleCase.symbol, RoleCase.decided_at).where(
        overdue_condition(maturation_days, now), *where
    )
    rows = conn.execute(q).all()
    if not rows:
        return set()
    decided = pl.Series("decided_at", [r[3] for r in rows])
    if decided.dtype == pl.String:
        decided = decided.str.to_datetime(time_unit="us")
    zone = getattr(decided.dtype, "time_zone", None)
    decided = (
        decided.dt.convert_time_zone("UTC")
        if zone is not None
        else decided.dt.replace_time_zone("UTC")
    )
    cases = pl.DataFrame(
        {
            "case_id": [r[0] for r in rows],
            "role_id": [r[1] for r in rows],
            "symbol": [r[2] for r in rows],
            "decided_at": decided,
        },
        schema_overrides={"case_id": pl.String, "role_id": pl.String, "symbol": pl.String},
    )
    mask = judge(cases)
    return set(cases["case_id"].filter(pl.Series(mask, dtype=pl.Boolean)).to_list())


@dataclass(frozen=True)
class Health:
    """The counts the doctor judges."""

    stale_pending: int
    unmeasurable: int
    failed_reflections: int
    deferred_reflections: int
    held_lessons: int
    open_reviews: int
    legacy_quarantined: int


def health_counts(
    conn: sa.Connection,
    maturation_days: Mapping[str, int],
    now: datetime,
    judge: StaleJudge,
) -> Health:
    """Stale pending cases (module docstring), failed and deferred reflections, queues."""

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
        stale_pending=len(
            stale_case_ids(
                conn,
                maturation_days,
                now,
                judge,
                RoleCase.pending_reason != PendingReason.INSUFFICIENT_DATA,
            )
        ),
        unmeasurable=count(
            RoleCase.state == CaseState.PENDING,
            RoleCase.pending_reason == PendingReason.INSUFFICIENT_DATA,
        ),
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
    judge: StaleJudge,
    *,
    role: str | None = None,
    state: str | None = None,
    since: datetime | None = None,
    limit: int = 1000,
    case_where: Sequence[sa.ColumnElement[bool]] = (),
    quarantine_where: Sequence[sa.ColumnElement[bool]] = (),
) -> list[dict[str, Any]]:
    """One row per case (or quarantined execution) matching the filters, newest first.

    `state` is a case state, `stale` (see the module docstring) or `quarantined`
    (held-back executions and legacy rows, with their reason). `case_where` and
    `quarantine_where` are further predicates (the clocks of `reflexmem.recall.clocks`).
    """
    rows: list[dict[str, Any]] = []
    if state != "quarantined":
        scope = [RoleCase.role_id == role] if role else []
        scope += list(case_where)
        if since:
            scope.append(RoleCase.decided_at >= since)
        stale_ids = stale_case_ids(conn, maturation_days, now, judge, *scope)
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
        ).where(*scope)
        if state == "stale":
            q = q.where(RoleCase.case_id.in_(sorted(stale_ids)))
        elif state:
            q = q.where(RoleCase.state == state)
        q = q.order_by(RoleCase.decided_at.desc(), RoleCase.case_id).limit(limit)
        for r in conn.execute(q).mappings():
            row = dict(r)
            row["kind"] = "case"
            row["stale"] = row["case_id"] in stale_ids
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
        q2 = q2.where(*quarantine_where)
        q2 = q2.order_by(Quarantine.created_at.desc(), Quarantine.subject_id).limit(limit)
        rows.extend(
            {**dict(r), "kind": "quarantined", "state": "quarantined"}
            for r in conn.execute(q2).mappings()
        )
    return rows[:limit]
