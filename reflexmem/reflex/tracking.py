"""Where skill versions and their evaluations are recorded: a seam, so the core stays MLflow-free.

`SkillTracking` is what the learning cycle needs from a tracking store: register a
version (with its YAML, parent and source experiences), open a run for one lifecycle
move with its evidence and close it (moving tags and aliases) or mark it failed when the
ledger refuses the move, and log an evaluation that moved nothing (an audit that found
no problem, a revalidation that failed). `adapters/tracking/skills.SkillTracker` is the
MLflow implementation; `NullSkillTracking` records nothing.

`register_tracked` and `transition_tracked` are the one way the cycle registers and
moves versions: ledger first (it decides), tracking store second, each step idempotent
so a crash in between is repaired by running the cycle again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

import sqlalchemy as sa

from reflexmem.ledger.reflex_enums import SkillState
from reflexmem.reflex.lifecycle import Evidence
from reflexmem.reflex.skills import SkillSpec
from reflexmem.reflex.versions import (
    VERSIONS,
    TransitionRecord,
    VersionInfo,
    register_skill,
    set_mlflow_version,
    transition,
    version_info,
)


class SkillTracking(Protocol):
    """A store of skill versions and of every evaluation of them."""

    def register(self, spec: SkillSpec, state: SkillState) -> str | None:
        """Create (or find) the tracked version of `spec`; its ID in the store."""
        ...

    def open_move(
        self, info: VersionInfo, to: SkillState, evidence: Sequence[Evidence]
    ) -> str | None:
        """Start the run of one move with its evidence, before the ledger write."""
        ...

    def finish_move(self, run_id: str, records: Sequence[TransitionRecord], mlflow: str) -> None:
        """After the commit: new states as tags, aliases moved, run closed."""
        ...

    def fail_move(self, run_id: str, reason: str) -> None:
        """The ledger refused the move: mark its run failed with the reason."""
        ...

    def log_check(
        self,
        info: VersionInfo,
        kind: str,
        evidence: Sequence[Evidence],
        detail: Mapping[str, Any],
    ) -> str | None:
        """An evaluation that moved nothing, as a finished run; its ID."""
        ...


class NullSkillTracking:
    """Records nothing (the ledger alone; tests that do not track)."""

    def register(self, spec: SkillSpec, state: SkillState) -> str | None:
        """No store."""
        return None

    def open_move(
        self, info: VersionInfo, to: SkillState, evidence: Sequence[Evidence]
    ) -> str | None:
        """No run."""
        return None

    def finish_move(self, run_id: str, records: Sequence[TransitionRecord], mlflow: str) -> None:
        """Nothing to finish."""

    def fail_move(self, run_id: str, reason: str) -> None:
        """Nothing to mark."""

    def log_check(
        self,
        info: VersionInfo,
        kind: str,
        evidence: Sequence[Evidence],
        detail: Mapping[str, Any],
    ) -> str | None:
        """No run."""
        return None


def register_tracked(
    engine: sa.Engine,
    tracker: SkillTracking,
    spec: SkillSpec,
    *,
    actor: str = "loader",
    now: datetime | None = None,
    also: Callable[[sa.Connection, VersionInfo], None] | None = None,
) -> VersionInfo:
    """Register `spec` in the ledger, then in the tracking store, then link the two.

    `also` runs in the registration's transaction when the version is new (the cycle
    records the version's source experiences there, so both commit or neither does).
    """
    return register_all_tracked(engine, tracker, [(spec, also)], actor=actor, now=now)[0]


Also = Callable[[sa.Connection, VersionInfo], None]
"""Extra ledger writes made in a new version's registration transaction."""


def register_all_tracked(
    engine: sa.Engine,
    tracker: SkillTracking,
    specs: Sequence[tuple[SkillSpec, Also | None]],
    *,
    actor: str = "loader",
    now: datetime | None = None,
) -> list[VersionInfo]:
    """Register every spec in the ledger in ONE transaction, then link each to the store.

    The generator registers all forms of one lesson together: a crash part way through
    must not leave a lesson half generalised (the rerun skips a lesson that has any
    version, so it would never register the rest).
    """
    infos: list[VersionInfo] = []
    with engine.begin() as conn:
        for spec, also in specs:
            known = conn.execute(
                sa.select(VERSIONS.c.version).where(
                    VERSIONS.c.skill_id == spec.skill_id, VERSIONS.c.version == spec.version
                )
            ).first()
            info = register_skill(conn, spec, actor=actor, now=now)
            if also is not None and known is None:
                also(conn, info)
            infos.append(info)
    return [
        _link(engine, tracker, spec, info) for (spec, _), info in zip(specs, infos, strict=True)
    ]


def _link(
    engine: sa.Engine, tracker: SkillTracking, spec: SkillSpec, info: VersionInfo
) -> VersionInfo:
    """Register `spec` in the tracking store (found again by its ledger key) and link it."""
    if info.mlflow_model_version is not None:
        return info
    version = tracker.register(spec, info.state)
    if version is None:
        return info
    with engine.begin() as conn:
        set_mlflow_version(conn, spec.skill_id, spec.version, version)
        return version_info(conn, spec.skill_id, spec.version)


def link_untracked(
    engine: sa.Engine, tracker: SkillTracking, versions: Sequence[tuple[SkillSpec, str | None]]
) -> int:
    """Finish the store registration of every version a crash left unlinked; how many.

    A crash after the ledger commit and before `set_mlflow_version` leaves the version
    without its model version; the store finds the one it may already hold by the
    version's tags (`find_version`) before creating one, so the number is the one an
    uninterrupted run records.
    """
    linked = 0
    for spec, mlflow in versions:
        if mlflow is None:
            with engine.connect() as conn:
                info = version_info(conn, spec.skill_id, spec.version)
            linked += _link(engine, tracker, spec, info).mlflow_model_version is not None
    return linked


def transition_tracked(
    engine: sa.Engine,
    tracker: SkillTracking,
    skill_id: str,
    version: int,
    to: SkillState,
    evidence: Sequence[Evidence],
    *,
    actor: str,
    rollout_fraction: float | None = None,
    now: datetime | None = None,
    also: Callable[[sa.Connection, str | None], None] | None = None,
) -> list[TransitionRecord]:
    """One lifecycle move in the ledger, recorded as a run of the tracking store.

    The run opens first (its ID goes on the transition row), the move commits, then the
    tags and aliases follow; a move the ledger refuses leaves the run failed. `also`
    runs in the move's transaction with the run ID (the cycle's `skill_checks` row), so
    a crash never leaves a move without its check record.
    """
    with engine.connect() as conn:
        info = version_info(conn, skill_id, version)
    run_id = tracker.open_move(info, to, evidence)
    try:
        with engine.begin() as conn:
            records = transition(
                conn, skill_id, version, to, evidence, actor=actor, now=now,
                rollout_fraction=rollout_fraction, mlflow_run_id=run_id,
            )  # fmt: skip
            if also is not None:
                also(conn, run_id)
    except Exception as exc:
        if run_id is not None:
            tracker.fail_move(run_id, str(exc))
        raise
    if run_id is not None:
        tracker.finish_move(run_id, records, info.mlflow_model_version or "")
    return records
