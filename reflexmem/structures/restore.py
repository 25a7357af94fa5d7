"""Quarantine the active bundle and restore an earlier one, verifying the restored pins.

A rollback is only safe if the bundle it restores is the bundle that once ran: the
same structure YAML, the same skill versions, the same knowledge-index version. Each
activation records checksums of those pins (`pin_checksums`) in its `activated`
event; before restoring a bundle, its pins are recomputed from the ledger and must
equal what was recorded when it was active (for a bundle activated before checksums
were recorded: the YAML's `sha256` column and the bundle ID, itself a hash of scope,
structure and pins). After the pointer moved, inside the same transaction, the now
active bundle is checked again; any difference raises and the transaction rolls
back, so a refused rollback changes nothing. `before_commit` lets the caller do its
own part (moving the MLflow alias) inside that transaction: if it fails, the ledger
does not move either, and a retry finds the drift again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from reflexmem.structures import persist
from reflexmem.structures.bundle import Bundle, DriftReport, bundle_id, check_bundle
from reflexmem.structures.refusals import StructureRefused
from reflexmem.structures.schema import parse_structure


class RollbackRefused(RuntimeError):
    """A rollback that cannot be done; nothing was changed."""


class UnknownScope(RollbackRefused):
    """No bundle was ever activated in this scope."""


class UnknownBundle(RollbackRefused):
    """The rollback target names no bundle, structure or model version of the scope."""


class TargetQuarantined(RollbackRefused):
    """The rollback target is itself quarantined."""


class NoEarlierBundle(RollbackRefused):
    """There is no earlier verified bundle to restore."""


class PinsChanged(RollbackRefused):
    """The target's pins differ from what was recorded when it was active."""


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _yaml(conn: sa.Connection, structure_id: str) -> str | None:
    return conn.execute(
        sa.select(persist.V.c.yaml).where(persist.V.c.structure_id == structure_id)
    ).scalar_one_or_none()


def _checksums(row: Mapping[str, Any], yaml_text: str | None) -> dict[str, str]:
    skills = sorted(row["skill_versions"] or [])
    return {
        "structure": "" if yaml_text is None else _sha(yaml_text),
        "skill_versions": _sha("\n".join(skills)),
        "index_version": _sha(row["index_version"]),
        "bundle": bundle_id(row["scope"], row["structure_id"], skills, row["index_version"]),
    }


def pin_checksums(conn: sa.Connection, row: Mapping[str, Any]) -> dict[str, str]:
    """Checksums of a bundle's pins, recomputed from the ledger as it is now.

    `structure`: the stored YAML; `skill_versions`, `index_version`: the bundle's pins;
    `bundle`: the bundle ID recomputed from scope, structure and pins (`bundle_id`).
    `row` is a bundle row or `Bundle.to_dict()`.
    """
    return _checksums(row, _yaml(conn, row["structure_id"]))


def recorded_pins(conn: sa.Connection, row: Mapping[str, Any]) -> dict[str, str]:
    """The checksums recorded when the bundle was last activated (or the ledger's own)."""
    ev = persist.EV
    stmt = (
        sa.select(ev.c.detail)
        .where(ev.c.kind == "activated", ev.c.bundle_id == row["bundle_id"])
        .order_by(ev.c.event_id.desc())
    )
    for detail in conn.execute(stmt).scalars():
        if isinstance(detail, dict) and isinstance(detail.get("pins"), dict):
            return {str(k): str(v) for k, v in detail["pins"].items()}
    sha = conn.execute(
        sa.select(persist.V.c.sha256).where(persist.V.c.structure_id == row["structure_id"])
    ).scalar_one_or_none()
    return {"structure": str(sha or ""), "bundle": str(row["bundle_id"])}


def verify_pins(conn: sa.Connection, row: Mapping[str, Any]) -> dict[str, str]:
    """The bundle's pin checksums, or `PinsChanged` if they differ from the recorded ones."""
    yaml_text = _yaml(conn, row["structure_id"])
    now, recorded = _checksums(row, yaml_text), recorded_pins(conn, row)
    bid = row["bundle_id"]
    changed = [
        f"{k} (recorded {v[:12]}, now {now.get(k, '')[:12]})"
        for k, v in recorded.items()
        if now.get(k) != v
    ]
    if changed:
        raise PinsChanged(f"{bid}: pins changed since it was active: {', '.join(changed)}")
    if yaml_text is None:
        raise PinsChanged(f"{bid}: its structure {row['structure_id']!r} is not stored")
    try:
        check_bundle(persist.to_bundle(dict(row)), parse_structure(yaml_text, bid))
    except StructureRefused as exc:
        reasons = "; ".join(f"{r.field}: {r.reason}" for r in exc.refusals)
        raise PinsChanged(f"{bid}: pins differ from its structure's: {reasons}") from exc
    return now


def scopes(conn: sa.Connection) -> list[str]:
    """Every scope with an active-bundle pointer, sorted."""
    return sorted(conn.execute(sa.select(persist.P.c.scope)).scalars())


def _current(conn: sa.Connection, scope: str) -> dict[str, Any]:
    bid = persist.active_bundle_id(conn, scope)
    row = persist.bundle_row(conn, bid) if bid else None
    if row is None:
        raise UnknownScope(f"scope {scope!r} has no active bundle")
    return row


def _by_reference(conn: sa.Connection, scope: str, ref: str) -> dict[str, Any]:
    """A bundle of the scope by bundle ID, structure ID or MLflow model version number."""
    b, v = persist.B, persist.V
    found = conn.execute(
        sa.select(b.c.bundle_id)
        .select_from(b.join(v, v.c.structure_id == b.c.structure_id))
        .where(
            b.c.scope == scope,
            sa.or_(b.c.bundle_id == ref, b.c.structure_id == ref, v.c.mlflow_version == ref),
        )
        .order_by(b.c.created_at.desc())
    ).first()
    row = persist.bundle_row(conn, found[0]) if found else None
    if row is None:
        raise UnknownBundle(f"scope {scope!r} has no bundle, structure or version {ref!r}")
    return row


def target_of(
    conn: sa.Connection, scope: str, current: Mapping[str, Any], to: str | None
) -> dict[str, Any]:
    """The bundle a rollback restores: `to`, or the previous one not quarantined."""
    if to is not None:
        row = _by_reference(conn, scope, to)
        if row["bundle_id"] == current["bundle_id"]:
            raise RollbackRefused(f"{row['bundle_id']} is the active bundle of {scope!r}")
        if row["state"] == "quarantined":
            raise TargetQuarantined(f"{row['bundle_id']} is quarantined; it cannot be restored")
        if row["activated_at"] is None:
            raise NoEarlierBundle(f"{row['bundle_id']} was never active (never verified)")
        return row
    seen = {current["bundle_id"]}
    target_id: str | None = current["previous_bundle_id"]
    while target_id and target_id not in seen:  # re-activations can make the chain a loop
        seen.add(target_id)
        found = persist.bundle_row(conn, target_id)
        if found is None:
            break
        if found["state"] != "quarantined":
            return found
        target_id = found["previous_bundle_id"]
    raise NoEarlierBundle(f"{current['bundle_id']} has no earlier verified bundle")


@dataclass(frozen=True)
class Restored:
    """A finished rollback: what was quarantined, what was restored, its pin checksums."""

    scope: str
    quarantined: Bundle
    restored: Bundle
    pins_before: dict[str, str]
    pins_after: dict[str, str]
    tracking: dict[str, Any] | None = field(default=None)


BeforeCommit = Callable[[Bundle, Bundle], Mapping[str, Any] | None]


def rollback(
    engine: sa.Engine,
    scope: str,
    *,
    to: str | None = None,
    drift: DriftReport | None = None,
    before_commit: BeforeCommit | None = None,
) -> Restored:
    """Quarantine the scope's active bundle and restore `to` (default: the previous one).

    One transaction: the target's pins are verified before and after the move, the
    events (`drift` when a drift report is given, `quarantined`, `rolled_back`) are
    recorded, then `before_commit(quarantined, restored)` runs; any error leaves the
    ledger as it was.
    """
    with engine.begin() as conn:
        current = _current(conn, scope)
        target = target_of(conn, scope, current, to)
        before = verify_pins(conn, target)
        at = persist.now()
        persist.set_bundle(conn, current["bundle_id"], state="quarantined", quarantined_at=at)
        persist.set_bundle(conn, target["bundle_id"], state="active", activated_at=at)
        persist.point_to(conn, scope, target["bundle_id"])
        if current["structure_id"] != target["structure_id"]:
            persist.set_lifecycle(conn, [current["structure_id"]], "quarantined")
        persist.set_lifecycle(conn, [target["structure_id"]], "active")
        now_active = _current(conn, scope)
        after = verify_pins(conn, now_active)
        if now_active["bundle_id"] != target["bundle_id"] or after != before:
            raise PinsChanged(f"{target['bundle_id']}: pins changed during the rollback")
        detail: dict[str, Any] = {
            "restored": target["bundle_id"],
            "reason": "drift" if drift is not None else "manual",
            "pins_before": before,
            "pins_after": after,
        }
        kinds = ["quarantined", "rolled_back"]
        if drift is not None:
            detail["drift"] = drift.to_dict()
            kinds.insert(0, "drift")
        for kind in kinds:
            persist.record_events(
                conn,
                kind=kind,
                structure_id=current["structure_id"],
                bundle_id=current["bundle_id"],
                reason=detail["reason"],
                detail=detail,
            )
        quarantined, restored = persist.to_bundle(current), persist.to_bundle(target)
        tracked = before_commit(quarantined, restored) if before_commit else None
    return Restored(
        scope, quarantined, restored, before, after, None if tracked is None else dict(tracked)
    )


def preview(engine: sa.Engine, scope: str, to: str | None = None) -> dict[str, Any]:
    """What a rollback of `scope` would restore and its pin checksums; changes nothing."""
    with engine.connect() as conn:
        current = _current(conn, scope)
        target = target_of(conn, scope, current, to)
        return {"restore": target["bundle_id"], "pins": verify_pins(conn, target)}
