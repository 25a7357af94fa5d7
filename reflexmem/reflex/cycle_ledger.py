"""Ledger reads and writes of the skill learning cycle.

Versions with the times of their moves, the sources of
generated versions, the checks the cycle made and the clock of the pre-decision checks.
Each function takes the caller's connection and joins its transaction.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, cast

import polars as pl
import sqlalchemy as sa

from reflexmem.ledger.bulk import bulk_insert
from reflexmem.ledger.reflex_enums import SkillState
from reflexmem.ledger.skill_cycle_models import CheckKind, SkillCheck, SkillSource
from reflexmem.ledger.sqlio import to_utc
from reflexmem.reflex.evidence import VersionView
from reflexmem.reflex.snapshot import load_snapshot
from reflexmem.reflex.trading import TRADE_FAMILY
from reflexmem.reflex.versions import TRANSITIONS, VERSIONS

CHECKS = cast(sa.Table, SkillCheck.__table__)
SOURCES = cast(sa.Table, SkillSource.__table__)


def load_views(conn: sa.Connection, task_family: str = TRADE_FAMILY) -> list[VersionView]:
    """Every version of the family with the times it last became limited, active, quarantined."""
    snapshot = load_snapshot(conn, task_family=task_family)
    moves = conn.execute(
        sa.select(TRANSITIONS.c.skill_id, TRANSITIONS.c.version, TRANSITIONS.c.to_state,
                  sa.func.max(TRANSITIONS.c.at))
        .join(VERSIONS, sa.and_(VERSIONS.c.skill_id == TRANSITIONS.c.skill_id,
                                VERSIONS.c.version == TRANSITIONS.c.version))
        .where(VERSIONS.c.task_family == task_family)
        .group_by(TRANSITIONS.c.skill_id, TRANSITIONS.c.version, TRANSITIONS.c.to_state)
    ).all()  # fmt: skip
    last: dict[tuple[str, int, str], datetime] = {
        (sid, int(v), str(state)): to_utc(at) for sid, v, state, at in moves
    }
    ordered = conn.execute(
        sa.select(TRANSITIONS.c.skill_id, TRANSITIONS.c.version, TRANSITIONS.c.to_state,
                  TRANSITIONS.c.at)
        .join(VERSIONS, sa.and_(VERSIONS.c.skill_id == TRANSITIONS.c.skill_id,
                                VERSIONS.c.version == TRANSITIONS.c.version))
        .where(VERSIONS.c.task_family == task_family)
        .order_by(TRANSITIONS.c.transition_id)
    ).all()  # fmt: skip
    history: dict[tuple[str, int], list[tuple[str, datetime]]] = {}
    for sid, v, state, at in ordered:
        history.setdefault((sid, int(v)), []).append((str(state), to_utc(at)))
    rows = conn.execute(
        sa.select(
            VERSIONS.c.skill_id,
            VERSIONS.c.version,
            VERSIONS.c.state_changed_at,
            VERSIONS.c.mlflow_model_version,
        ).where(VERSIONS.c.task_family == task_family)
    ).all()
    meta = {
        (r.skill_id, r.version): (to_utc(r.state_changed_at), r.mlflow_model_version) for r in rows
    }
    views = []
    for pinned in snapshot.skills:
        sid, v = pinned.spec.skill_id, pinned.spec.version
        changed, mlflow = meta[(sid, v)]
        views.append(
            VersionView(
                spec=pinned.spec,
                state=pinned.state,
                changed_at=changed,
                rollout_fraction=pinned.rollout_fraction,
                limited_at=last.get((sid, v, SkillState.LIMITED.value)),
                active_at=last.get((sid, v, SkillState.ACTIVE.value)),
                quarantined_at=last.get((sid, v, SkillState.QUARANTINED.value)),
                retired_at=last.get((sid, v, SkillState.RETIRED.value)),
                mlflow_model_version=mlflow,
                history=tuple(history.get((sid, v), [])),
            )
        )
    return views


def write_sources(conn: sa.Connection, skill_id: str, version: int, sources: pl.DataFrame) -> int:
    """Record the episodes (with case and decision) a generated version was learned from."""
    frame = sources.select(
        pl.lit(skill_id).alias("skill_id"),
        pl.lit(version, dtype=pl.Int64).alias("version"),
        "episode_id",
        "case_id",
        "decision_id",
        "pattern",
    ).unique("episode_id", keep="first", maintain_order=True)
    return bulk_insert(conn, SOURCES.name, frame)


def record_check(
    conn: sa.Connection,
    kind: CheckKind,
    *,
    at: datetime,
    task_family: str = TRADE_FAMILY,
    skill_id: str | None = None,
    version: int | None = None,
    after: datetime | None = None,
    through: datetime | None = None,
    passed: bool | None = None,
    moved_to: str | None = None,
    metrics: Mapping[str, Any] | None = None,
    detail: Mapping[str, Any] | None = None,
    run_id: str | None = None,
) -> None:
    """Append one `skill_checks` row."""
    conn.execute(
        CHECKS.insert().values(
            kind=kind.value,
            task_family=task_family,
            skill_id=skill_id,
            version=version,
            window_after=after,
            window_through=through,
            passed=passed,
            moved_to=moved_to,
            metrics=json.loads(json.dumps(metrics or {}, default=str)),
            detail=json.loads(json.dumps(detail or {}, default=str)),
            mlflow_run_id=run_id,
            at=at,
        )
    )


def last_through(
    conn: sa.Connection,
    kind: CheckKind,
    *,
    task_family: str = TRADE_FAMILY,
    skill_id: str | None = None,
    version: int | None = None,
) -> datetime | None:
    """The end of the newest window of this kind (of one version, if given)."""
    query = sa.select(sa.func.max(CHECKS.c.window_through)).where(
        CHECKS.c.kind == kind.value, CHECKS.c.task_family == task_family
    )
    if skill_id is not None:
        query = query.where(CHECKS.c.skill_id == skill_id, CHECKS.c.version == version)
    value = conn.execute(query).scalar_one_or_none()
    return None if value is None else to_utc(value)


def generated_clusters(views: Sequence[VersionView]) -> set[tuple[str, str]]:
    """(namespace, pattern) of every lesson some registered version was generated from."""
    return {v.cluster for v in views if v.spec.provenance.get("pattern")}
