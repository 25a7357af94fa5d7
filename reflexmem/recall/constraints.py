"""Recall eligibility as SQL: what may be recalled, decided before anything is ranked.

Only reflected, learnable, non-quarantined manual cases of exactly the asked role, with
the symbol and scenario when given. Time is bi-temporal: `as_of` is *valid* time (the
cycle's clock: a case counts once it was decided and its outcome matured by then, see
`valid_time`), so a store back-filled from past years recalls at each clock what a live
run at that clock would have; `known_at` is *recorded* time (admitted and reflected by
then, wall clock), for audits of what the system had written. Every rule is
a SQL predicate (`case_filters`) that the database applies before ranking, and
`violations` re-states the same rules in Python so recall can prove, per hit, that
ranking relaxed none of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

import sqlalchemy as sa

from reflexmem.ledger.enums import CaseState, Origin, OutcomeClass, SubjectKind
from reflexmem.ledger.memory_models import CaseReflection
from reflexmem.ledger.models import Quarantine, RoleCase, TradeExecution
from reflexmem.settings import MemoryMode

LEARNABLE_CLASSES = (OutcomeClass.LOGIC_ERROR.value, OutcomeClass.MISSING_DATA.value)
MANUAL_ORIGINS = (Origin.MANUAL_AGENT.value, Origin.MANUAL_EXTERNAL.value)


class RecallUnavailable(RuntimeError):
    """Recall was asked for outside `active` mode (docs/design.md §9: shadow has no recall)."""


def require_active(mode: MemoryMode) -> None:
    """Raise :class:`RecallUnavailable` unless the frozen runtime mode is `active`."""
    if mode is not MemoryMode.ACTIVE:
        raise RecallUnavailable(
            f"recall is not available in {mode.value!s} mode: role cases are recorded "
            "and evaluated, but no prompt may retrieve them (set ROLE_MEMORY_MODE=active "
            "and restart)"
        )


def _utc(value: datetime) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"as_of must be timezone-aware, got {value.isoformat()}")
    return value.astimezone(UTC)


@dataclass(frozen=True, slots=True)
class RecallConstraints:
    """The hard filters of one recall; `role` is required and matched exactly."""

    role: str
    symbol: str | None = None
    scenario: str | None = None
    as_of: datetime | None = None
    known_at: datetime | None = None

    def __post_init__(self) -> None:
        if not self.role:
            raise ValueError("recall needs a role")
        for name in ("as_of", "known_at"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, _utc(value))


rc = cast(sa.Table, RoleCase.__table__)
te = cast(sa.Table, TradeExecution.__table__)
cr = cast(sa.Table, CaseReflection.__table__)
qt = cast(sa.Table, Quarantine.__table__)


def valid_time() -> sa.ColumnElement[Any]:
    """When a case's lesson became true on the cycle's clock: its outcome's maturation.

    A case with no maturation stamp (reflected before migration 0019, or by a path that
    skipped the maturity check) is valid from its recorded reflection, never earlier.
    """
    return sa.func.coalesce(rc.c.matured_at, cr.c.reflected_at)


def case_shape(c: RecallConstraints) -> tuple[bool, bool, bool, bool]:
    """Which optional constraints are set: the shape `case_filters` builds predicates for."""
    return (c.symbol is not None, c.scenario is not None, c.as_of is not None,
            c.known_at is not None)  # fmt: skip


def case_params(c: RecallConstraints) -> dict[str, Any]:
    """The values of `case_filters`' bound parameters (for a statement of `c`'s shape)."""
    values = {"c_role": c.role, "c_symbol": c.symbol, "c_scenario": c.scenario,
              "c_as_of": c.as_of, "c_known_at": c.known_at}  # fmt: skip
    return {k: v for k, v in values.items() if v is not None}


def case_filters(c: RecallConstraints) -> list[sa.ColumnElement[bool]]:
    """Every eligibility rule as a predicate over role_cases, executions, reflections.

    The constraint values are named bound parameters holding `c`'s values, so a
    statement built once per `case_shape` runs for any constraints of that shape with
    `case_params` (recall builds its statements once, `fts.candidate_query`).
    """
    preds: list[sa.ColumnElement[bool]] = [
        rc.c.role_id == sa.bindparam("c_role", c.role),
        rc.c.state == CaseState.REFLECTED.value,
        rc.c.outcome_class.in_(LEARNABLE_CLASSES),
        rc.c.lesson.is_not(None),
        sa.func.length(sa.func.trim(rc.c.lesson)) > 0,
        sa.or_(
            te.c.origin == Origin.MANUAL_AGENT.value,
            sa.and_(te.c.origin == Origin.MANUAL_EXTERNAL.value, te.c.origin_verified),
        ),
        ~sa.exists().where(qt.c.decision_id == rc.c.decision_id),
        ~sa.exists().where(
            qt.c.subject_kind == SubjectKind.EXECUTION.value,
            qt.c.subject_id == rc.c.execution_id,
        ),
    ]
    if c.symbol is not None:
        preds.append(rc.c.symbol == sa.bindparam("c_symbol", c.symbol))
    if c.scenario is not None:
        preds.append(rc.c.scenario == sa.bindparam("c_scenario", c.scenario))
    if c.as_of is not None:
        as_of = sa.bindparam("c_as_of", c.as_of, type_=rc.c.decided_at.type)
        preds += [rc.c.decided_at <= as_of, valid_time() <= as_of]
    if c.known_at is not None:
        known = sa.bindparam("c_known_at", c.known_at, type_=rc.c.admitted_at.type)
        preds += [rc.c.admitted_at <= known, cr.c.reflected_at <= known]
    return preds


def case_joins(base: sa.FromClause) -> sa.FromClause:
    """Join the execution (origin) and the reflection stamp (as-of) onto role_cases."""
    return base.join(te, te.c.execution_id == rc.c.execution_id).join(
        cr, cr.c.case_id == rc.c.case_id
    )


CASE_COLUMNS = (
    rc.c.case_id,
    rc.c.decision_id,
    rc.c.execution_id,
    rc.c.role_id,
    rc.c.symbol,
    rc.c.scenario,
    rc.c.state,
    rc.c.outcome_class,
    rc.c.decision_text,
    rc.c.lesson,
    rc.c.decided_at,
    rc.c.admitted_at,
    cr.c.reflected_at,
    valid_time().label("valid_at"),
    te.c.origin,
    te.c.origin_verified,
)


def _aware(value: Any) -> datetime:
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if not isinstance(value, datetime):
        raise TypeError(f"expected a timestamp, got {value!r}")
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def violations(row: Any, c: RecallConstraints) -> list[str]:
    """The rules a fetched case row breaks (quarantine is checked by SQL only)."""
    bad: list[str] = []
    if row["role_id"] != c.role:
        bad.append("role")
    if row["state"] != CaseState.REFLECTED.value:
        bad.append("state")
    if row["outcome_class"] not in LEARNABLE_CLASSES:
        bad.append("outcome_class")
    if not (row["lesson"] or "").strip():
        bad.append("lesson")
    origin = row["origin"]
    if not (
        origin == Origin.MANUAL_AGENT.value
        or (origin == Origin.MANUAL_EXTERNAL.value and bool(row["origin_verified"]))
    ):
        bad.append("origin")
    if c.symbol is not None and row["symbol"] != c.symbol:
        bad.append("symbol")
    if c.scenario is not None and row["scenario"] != c.scenario:
        bad.append("scenario")
    if c.as_of is not None:
        as_of = c.as_of
        bad += [col for col in ("decided_at", "valid_at") if _aware(row[col]) > as_of]
    if c.known_at is not None:
        known = c.known_at
        bad += [col for col in ("admitted_at", "reflected_at") if _aware(row[col]) > known]
    return bad
