"""Skill versions in the ledger: registration, lifecycle moves with evidence, snapshots.

`register_skill` admits a validated file as a new version in state `candidate` after
the checks only the ledger can make: the parent (`previous_version`, `derived_from`)
exists and holds every permission the new version claims, the owner and task family
match the skill's, a registered version is never rewritten, and a file cannot claim a
state the ledger has not reached. `transition` makes one legal move (see `lifecycle`)
as a compare-and-set on the state, records the evidence, and retires the previous
active version in the same transaction when a new one becomes active; the partial
unique index on `skill_versions` makes two concurrent promotions impossible.

What an episode pins is `reflexmem.reflex.snapshot.load_snapshot`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

import sqlalchemy as sa

from reflexmem.ledger.reflex_enums import SkillState
from reflexmem.ledger.reflex_models import Skill, SkillTransition, SkillVersion
from reflexmem.reflex.lifecycle import (
    Evidence,
    EvidenceKind,
    LifecycleError,
    check_move,
    shortest_path,
)
from reflexmem.reflex.skills import SkillLoadError, SkillSpec

SKILLS = cast(sa.Table, Skill.__table__)
VERSIONS = cast(sa.Table, SkillVersion.__table__)
TRANSITIONS = cast(sa.Table, SkillTransition.__table__)


@dataclass(frozen=True)
class VersionInfo:
    """A version's ledger row, without the contract body."""

    skill_id: str
    version: int
    state: SkillState
    owner: str
    task_family: str
    layer: str
    previous_version: int | None
    rollout_fraction: float | None
    spec_sha256: str
    mlflow_model_version: str | None
    state_changed_at: datetime

    @property
    def key(self) -> str:
        """`skill_id@version`."""
        return f"{self.skill_id}@{self.version}"


@dataclass(frozen=True)
class TransitionRecord:
    """One recorded lifecycle move."""

    skill_id: str
    version: int
    from_state: SkillState | None
    to_state: SkillState
    evidence: tuple[dict[str, Any], ...]
    actor: str
    at: datetime
    mlflow_run_id: str | None


def _info(row: sa.Row[Any]) -> VersionInfo:
    return VersionInfo(
        skill_id=row.skill_id,
        version=row.version,
        state=SkillState(row.state),
        owner=row.owner,
        task_family=row.task_family,
        layer=str(row.layer),
        previous_version=row.previous_version,
        rollout_fraction=row.rollout_fraction,
        spec_sha256=row.spec_sha256,
        mlflow_model_version=row.mlflow_model_version,
        state_changed_at=row.state_changed_at,
    )


def _row(conn: sa.Connection, skill_id: str, version: int) -> sa.Row[Any] | None:
    where = sa.and_(VERSIONS.c.skill_id == skill_id, VERSIONS.c.version == version)
    return conn.execute(sa.select(VERSIONS).where(where)).one_or_none()


def version_info(conn: sa.Connection, skill_id: str, version: int) -> VersionInfo:
    """The ledger row of `skill_id@version`; `KeyError` if it was never registered."""
    row = _row(conn, skill_id, version)
    if row is None:
        raise KeyError(f"skill version {skill_id}@{version} is not registered")
    return _info(row)


def _check_parent(conn: sa.Connection, spec: SkillSpec, field: str, skill_id: str, v: int) -> None:
    parent = _row(conn, skill_id, v)
    if parent is None:
        raise SkillLoadError(spec.source, field, f"parent {skill_id}@{v} is not registered")
    tools = set(parent.permissions["tools"])
    effects = set(parent.permissions["effects"])
    wider_tools = sorted(spec.tools - tools)
    wider_effects = sorted(str(e) for e in spec.effects if str(e) not in effects)
    if wider_tools:
        raise SkillLoadError(
            spec.source,
            "bounds.permissions.tools",
            f"{wider_tools} widen the permissions of parent {skill_id}@{v} ({sorted(tools)})",
        )
    if wider_effects:
        raise SkillLoadError(
            spec.source,
            "bounds.permissions.effects",
            f"{wider_effects} widen the permissions of parent {skill_id}@{v}",
        )


def _version_row(spec: SkillSpec, now: datetime) -> dict[str, Any]:
    raw = spec.raw
    start, end = spec.valid_period()
    return {
        "skill_id": spec.skill_id,
        "version": spec.version,
        "owner": spec.owner,
        "source_experiences": list(spec.source_experiences),
        "trigger": spec.trigger,
        "input_contract": spec.input_contract,
        "task_family": spec.task_family,
        "environment_version": spec.environment_version,
        "valid_from": start,
        "valid_until": end,
        "layer": spec.layer.value,
        "options": list(spec.options),
        "argument_schema": spec.argument_schema,
        "procedure": spec.procedure,
        "action": spec.action,
        "confidence_floor": spec.confidence_floor,
        "evaluation_set": spec.evaluation_set,
        "counter_examples": spec.counter_examples,
        "quality_floor": spec.quality_floor,
        "post_conditions": spec.post_conditions,
        "permissions": dict(raw["bounds"]["permissions"]),
        "budget": dict(raw["bounds"].get("budget", {})),
        "retry_limit": spec.retry_limit,
        "idempotency": dict(raw["bounds"].get("idempotency", {})),
        "rejection_conditions": spec.rejection_conditions,
        "escalation_target": spec.escalation_target.value,
        "previous_version": spec.previous_version,
        "state": SkillState.CANDIDATE.value,
        "rollout_fraction": None,
        "source_file": spec.source,
        "source_yaml": spec.source_yaml,
        "spec_sha256": spec.sha256,
        "mlflow_model_version": None,
        "created_at": now,
        "state_changed_at": now,
        "recorded_at": datetime.now(UTC),
    }


def register_skill(
    conn: sa.Connection, spec: SkillSpec, *, actor: str = "loader", now: datetime | None = None
) -> VersionInfo:
    """Admit `spec` as a `candidate` version (a no-op if that exact version is registered)."""
    now = now or datetime.now(UTC)
    existing = _row(conn, spec.skill_id, spec.version)
    if existing is not None:
        if existing.spec_sha256 != spec.sha256:
            raise SkillLoadError(
                spec.source,
                "version",
                f"{spec.key} is already registered with other content; give the change a new "
                "version",
            )
        if SkillState(existing.state) != spec.state:
            raise SkillLoadError(
                spec.source,
                "state",
                f"the file claims {spec.state} but the ledger has {existing.state}; lifecycle "
                "moves are made by transition() with evidence, never by editing the file",
            )
        return _info(existing)
    if spec.state != SkillState.CANDIDATE:
        path = shortest_path(SkillState.CANDIDATE, spec.state) or []
        skipped = " -> ".join(path[:-1]) if path else "the lifecycle"
        raise SkillLoadError(
            spec.source,
            "state",
            f"a new version enters as candidate; {spec.state} would skip {skipped}",
        )
    known = conn.execute(sa.select(SKILLS).where(SKILLS.c.skill_id == spec.skill_id)).one_or_none()
    if known is not None and known.owner != spec.owner:
        raise SkillLoadError(spec.source, "owner", f"{spec.skill_id} belongs to {known.owner!r}")
    if known is not None and known.task_family != spec.task_family:
        raise SkillLoadError(
            spec.source,
            "applicability.task_family",
            f"{spec.skill_id} decides {known.task_family!r}; a new family is a new skill",
        )
    if spec.previous_version is not None:
        _check_parent(conn, spec, "fallback.previous_version", spec.skill_id, spec.previous_version)
    if spec.derived_from is not None:
        other, number = spec.derived_from.split("@")
        _check_parent(conn, spec, "derived_from", other, int(number))
    if known is None:
        conn.execute(
            SKILLS.insert().values(
                skill_id=spec.skill_id,
                owner=spec.owner,
                task_family=spec.task_family,
                created_at=now,
            )
        )
    conn.execute(VERSIONS.insert().values(**_version_row(spec, now)))
    _record(conn, spec.skill_id, spec.version, None, SkillState.CANDIDATE, [], actor, now, None)
    return version_info(conn, spec.skill_id, spec.version)


def _record(
    conn: sa.Connection,
    skill_id: str,
    version: int,
    frm: SkillState | None,
    to: SkillState,
    evidence: Sequence[Evidence],
    actor: str,
    at: datetime,
    run_id: str | None,
) -> TransitionRecord:
    stored = tuple(e.as_json() for e in evidence)
    conn.execute(
        TRANSITIONS.insert().values(
            skill_id=skill_id,
            version=version,
            from_state=None if frm is None else frm.value,
            to_state=to.value,
            evidence=list(stored),
            actor=actor,
            mlflow_run_id=run_id,
            at=at,
        )
    )
    return TransitionRecord(skill_id, version, frm, to, stored, actor, at, run_id)


def _set_state(
    conn: sa.Connection,
    info: VersionInfo,
    to: SkillState,
    now: datetime,
    rollout_fraction: float | None,
) -> None:
    changed = conn.execute(
        VERSIONS.update()
        .where(
            VERSIONS.c.skill_id == info.skill_id,
            VERSIONS.c.version == info.version,
            VERSIONS.c.state == info.state.value,
        )
        .values(state=to.value, state_changed_at=now, rollout_fraction=rollout_fraction)
    ).rowcount
    if changed != 1:
        raise LifecycleError(f"{info.key} changed state concurrently; read it again and retry")


def transition(
    conn: sa.Connection,
    skill_id: str,
    version: int,
    to: SkillState,
    evidence: Sequence[Evidence],
    *,
    actor: str,
    now: datetime | None = None,
    rollout_fraction: float | None = None,
    mlflow_run_id: str | None = None,
) -> list[TransitionRecord]:
    """Make one legal move with its evidence and return every move recorded.

    A promotion to active also retires the previous active version, in this transaction.
    """
    now = now or datetime.now(UTC)
    info = version_info(conn, skill_id, version)
    quality_floor = float(
        conn.execute(
            sa.select(VERSIONS.c.quality_floor).where(
                VERSIONS.c.skill_id == skill_id, VERSIONS.c.version == version
            )
        ).scalar_one()
    )
    check_move(info.key, info.state, to, evidence, quality_floor=quality_floor)
    if to == SkillState.LIMITED and (rollout_fraction is None or not 0 < rollout_fraction <= 1):
        raise LifecycleError(f"{info.key}: limited needs a rollout fraction in (0, 1]")
    records: list[TransitionRecord] = []
    if to == SkillState.ACTIVE:
        current = conn.execute(
            sa.select(VERSIONS).where(
                VERSIONS.c.skill_id == skill_id, VERSIONS.c.state == SkillState.ACTIVE.value
            )
        ).one_or_none()
        if current is not None:
            old = _info(current)
            why = Evidence(EvidenceKind.SUPERSEDED, True, detail={"by": info.key})
            _set_state(conn, old, SkillState.RETIRED, now, None)
            records.append(
                _record(
                    conn,
                    skill_id,
                    old.version,
                    old.state,
                    SkillState.RETIRED,
                    [why],
                    actor,
                    now,
                    mlflow_run_id,
                )
            )
    keep = rollout_fraction if to == SkillState.LIMITED else None
    _set_state(conn, info, to, now, keep)
    records.append(
        _record(conn, skill_id, version, info.state, to, evidence, actor, now, mlflow_run_id)
    )
    return records


def transitions_of(
    conn: sa.Connection, skill_id: str, version: int | None = None
) -> list[TransitionRecord]:
    """Recorded moves of a skill (or one version), oldest first."""
    query = sa.select(TRANSITIONS).where(TRANSITIONS.c.skill_id == skill_id)
    if version is not None:
        query = query.where(TRANSITIONS.c.version == version)
    rows = conn.execute(query.order_by(TRANSITIONS.c.transition_id)).all()
    return [
        TransitionRecord(
            r.skill_id,
            r.version,
            None if r.from_state is None else SkillState(r.from_state),
            SkillState(r.to_state),
            tuple(r.evidence),
            r.actor,
            r.at,
            r.mlflow_run_id,
        )
        for r in rows
    ]


def set_mlflow_version(conn: sa.Connection, skill_id: str, version: int, mlflow: str) -> None:
    """Remember which MLflow registered-model version mirrors this skill version."""
    conn.execute(
        VERSIONS.update()
        .where(VERSIONS.c.skill_id == skill_id, VERSIONS.c.version == version)
        .values(mlflow_model_version=mlflow)
    )
