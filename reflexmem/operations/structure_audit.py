"""Drift of the active structure bundles, quarantine and rollback, as operations.

The core (`reflexmem.structures.rollout`, `restore`) knows how to test a bundle for
drift and how to roll one back safely; nothing ran it until this module. The scheduled
`audit` flow runs `run_structure_audit` (stage `audit_structures`) after the skill
audit: every scope with an active bundle is tested, and a drifted bundle is
quarantined and the previous verified one restored, its pin checksums checked before
and after. `reflexmem structures drift` runs the same test without changing anything
(`apply=False`), and `reflexmem structures rollback` is `rollback_structure`, the manual
rollback to a chosen earlier bundle. The MLflow aliases move through the resources'
`structure_tracker` inside the ledger transaction (no tracking: nothing to move), so the
registry and the ledger do not disagree after a failure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from reflexmem.operations.resources import Resources
from reflexmem.operations.runner import StageRunner
from reflexmem.structures import restore, rollout, trading_drift, trading_gate
from reflexmem.structures.bundle import Bundle, DriftReport


class StructureAuditRefused(restore.RollbackRefused):
    """A drifted bundle could not be rolled back (the report says which and why)."""

    def __init__(self, message: str, report: StructureAudit) -> None:
        super().__init__(message)
        self.report = report


@dataclass(frozen=True)
class ScopeAudit:
    """One scope: its drift test and, if it was rolled back, what moved.

    `skipped` says why a scope was not tested (no active bundle); `refused` why a
    drifted bundle was not rolled back (nothing changed); `restore` is the bundle a
    rollback would restore (drift reports that change nothing).
    """

    scope: str
    active: str | None = None
    drifted: bool = False
    drift: dict[str, Any] | None = None
    quarantined: str | None = None
    restored: str | None = None
    pins_before: dict[str, str] | None = None
    pins_after: dict[str, str] | None = None
    mlflow: dict[str, Any] | None = None
    restore: str | None = None
    skipped: str | None = None
    refused: str | None = None


@dataclass(frozen=True)
class StructureAudit:
    """Every scope audited, in scope order."""

    scopes: tuple[ScopeAudit, ...] = field(default_factory=tuple)

    @property
    def rolled_back(self) -> tuple[ScopeAudit, ...]:
        """The scopes whose bundle was quarantined and replaced."""
        return tuple(s for s in self.scopes if s.restored is not None)


def _scopes(res: Resources, scope: str | None) -> list[str]:
    if scope is not None:
        return [scope]
    with res.engine.connect() as conn:
        return restore.scopes(conn)


def _mover(res: Resources) -> restore.BeforeCommit:
    def move(quarantined: Bundle, restored: Bundle) -> Any:
        return res.structure_tracker.roll_back(quarantined.structure_id, restored.structure_id)

    return move


def _recent_of(res: Resources, scope: str) -> rollout.RecentOf | None:
    """How a scope's bundle is judged: trading on realized outcomes, the others on episodes."""
    if scope != trading_gate.SCOPE:
        return None
    return lambda conn, bundle_id: trading_drift.recent_wins(conn, res.registry, bundle_id)


def _rolled(drift: DriftReport | None, done: restore.Restored) -> ScopeAudit:
    return ScopeAudit(
        done.scope,
        active=done.restored.bundle_id,
        drifted=bool(drift and drift.drifted),
        drift=None if drift is None else drift.to_dict(),
        quarantined=done.quarantined.bundle_id,
        restored=done.restored.bundle_id,
        pins_before=done.pins_before,
        pins_after=done.pins_after,
        mlflow=done.tracking,
    )


def _audit_scope(res: Resources, scope: str, apply: bool) -> ScopeAudit:
    found = rollout.active(res.engine, scope)
    if found is None:
        return ScopeAudit(scope, skipped="no active bundle")
    bid = found[0].bundle_id
    report = rollout.check_drift(res.engine, scope, _recent_of(res, scope))
    if not report.drifted:
        return ScopeAudit(scope, active=bid, drift=report.to_dict())
    try:
        if not apply:
            plan = restore.preview(res.engine, scope)
            return ScopeAudit(
                scope,
                active=bid,
                drifted=True,
                drift=report.to_dict(),
                restore=plan["restore"],
                pins_before=plan["pins"],
            )
        done = restore.rollback(res.engine, scope, drift=report, before_commit=_mover(res))
    except restore.RollbackRefused as exc:
        return ScopeAudit(scope, active=bid, drifted=True, drift=report.to_dict(), refused=str(exc))
    return _rolled(report, done)


def audit_structures(
    res: Resources, scope: str | None = None, apply: bool = True
) -> StructureAudit:
    """Test every scope's active bundle for drift; roll back the drifted ones (if `apply`).

    A scope without an active bundle is skipped. A drifted bundle that cannot be rolled
    back (no earlier verified bundle, pins changed) is left as it is, and after every
    scope was audited `StructureAuditRefused` names them (with `apply` only: the drift
    report itself is never an error).
    """
    report = StructureAudit(tuple(_audit_scope(res, s, apply) for s in _scopes(res, scope)))
    refused = [s for s in report.scopes if s.refused]
    if apply and refused:
        lines = "; ".join(f"{s.scope}: {s.refused}" for s in refused)
        raise StructureAuditRefused(f"drift found, rollback refused: {lines}", report)
    return report


def rollback_structure(res: Resources, scope: str, to: str | None = None) -> ScopeAudit:
    """Quarantine the scope's active bundle and restore `to` (default: the previous one).

    `to` is a bundle ID, a structure ID or an MLflow model version number of the scope.
    Raises a `restore.RollbackRefused` subclass (unknown scope or bundle, quarantined
    target, no earlier bundle, changed pins) and then changes nothing.
    """
    found = rollout.active(res.engine, scope)
    if found is None:
        raise restore.UnknownScope(f"scope {scope!r} has no active bundle")
    drift = rollout.check_drift(res.engine, scope, _recent_of(res, scope))
    done = restore.rollback(res.engine, scope, to=to, before_commit=_mover(res))
    return _rolled(drift, done)


def run_structure_audit(runner: StageRunner, scope: str | None = None) -> StructureAudit:
    """The structure part of the daily `audit` flow, through `runner`."""
    return runner.run(audit_structures, scope=scope)
