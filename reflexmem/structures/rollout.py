"""Bundles in service: activate, run, watch for drift, quarantine and roll back, replay.

Activation and rollback each run in one transaction: the scope's active-bundle
pointer, the bundle states and the structure versions' lifecycles move together or
not at all, so structure, skill and index versions can never be half rolled back.
The replay runs recorded episodes again under whatever bundle is active now; after a
rollback it must reproduce what was recorded before the change.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import sqlalchemy as sa

from reflexmem.structures import persist
from reflexmem.structures.bundle import Bundle, DriftReport, bundle_for, check_bundle, detect_drift
from reflexmem.structures.evaluate import AnyEnvironment, Evaluation, replay
from reflexmem.structures.model import Structure
from reflexmem.structures.restore import RollbackRefused as RollbackRefused
from reflexmem.structures.restore import pin_checksums, rollback
from reflexmem.structures.runtime import EpisodeResult, Task


def baseline_of(ev: Evaluation) -> dict[str, list[int]]:
    """Per family [successes, episodes] of an evaluation (a bundle's drift baseline)."""
    out: dict[str, list[int]] = {}
    for r in ev.results:
        pair = out.setdefault(r.family, [0, 0])
        pair[0] += int(r.solved)
        pair[1] += 1
    return out


def activate(
    engine: sa.Engine,
    scope: str,
    structure_id: str,
    baseline: Evaluation | None = None,
    counts: Mapping[str, list[int]] | None = None,
) -> Bundle:
    """Make a stored version the scope's active bundle (one transaction).

    Its drift baseline is `counts` ([successes, episodes] per family) when given, else
    the success per family of `baseline` (`baseline_of`).
    """
    if counts is None and baseline is not None:
        counts = baseline_of(baseline)
    with engine.begin() as conn:
        stored = persist.get_version(conn, structure_id)
        if stored is None:
            raise KeyError(f"no structure version {structure_id!r}")
        bundle = bundle_for(stored.structure, scope)
        check_bundle(bundle, stored.structure)
        persist.save_bundle(conn, bundle, None if counts is None else dict(counts))
        previous = persist.active_bundle_id(conn, scope)
        if previous == bundle.bundle_id:
            return bundle
        at = persist.now()
        if previous is not None:
            persist.set_bundle(conn, previous, state="superseded")
            prev_row = persist.bundle_row(conn, previous)
            if prev_row is not None and prev_row["structure_id"] != structure_id:
                persist.set_lifecycle(conn, [prev_row["structure_id"]], "retired")
        persist.set_bundle(
            conn, bundle.bundle_id, state="active", activated_at=at, previous_bundle_id=previous
        )
        persist.point_to(conn, scope, bundle.bundle_id)
        persist.set_lifecycle(conn, [structure_id], "active")
        persist.record_events(
            conn,
            kind="activated",
            structure_id=structure_id,
            bundle_id=bundle.bundle_id,
            # what a rollback checks the bundle against
            detail={"pins": pin_checksums(conn, bundle.to_dict())},
        )
    return bundle


def active(engine: sa.Engine, scope: str) -> tuple[Bundle, Structure] | None:
    """The scope's active bundle and its structure."""
    with engine.connect() as conn:
        bid = persist.active_bundle_id(conn, scope)
        row = persist.bundle_row(conn, bid) if bid else None
        if row is None:
            return None
        stored = persist.get_version(conn, row["structure_id"])
    assert stored is not None
    return persist.to_bundle(row), stored.structure


def _versions(bundle: Bundle) -> dict[str, str]:
    return {v.split("@", 1)[0]: v for v in bundle.skill_versions}


def run_active(
    engine: sa.Engine, scope: str, env: AnyEnvironment, tasks: Sequence[Task]
) -> tuple[Bundle, list[EpisodeResult]]:
    """Run tasks under the active bundle and record the episodes and any refusals."""
    found = active(engine, scope)
    if found is None:
        raise KeyError(f"scope {scope!r} has no active bundle")
    bundle, structure = found
    ev = replay(
        structure,
        env,
        tasks,
        skill_versions=_versions(bundle),
        index_version=bundle.index_version,
    )
    with engine.begin() as conn:
        persist.save_episodes(conn, bundle, tasks, ev.results)
        persist.record_events(conn, ev.refusals, bundle_id=bundle.bundle_id)
    return bundle, list(ev.results)


RecentOf = Callable[[sa.Connection, str], Mapping[str, tuple[int, int]]]
"""(connection, bundle ID) -> (successes, episodes) per family since it was activated."""


def recorded_episodes(conn: sa.Connection, bundle_id: str) -> dict[str, tuple[int, int]]:
    """Per family (successes, episodes) of the bundle's recorded episodes (`run_active`)."""
    ep = persist.EP
    stmt = (
        sa.select(ep.c.family, sa.func.sum(sa.cast(ep.c.success, sa.Integer)), sa.func.count())
        .where(ep.c.bundle_id == bundle_id)
        .group_by(ep.c.family)
    )
    return {f: (int(s or 0), int(n)) for f, s, n in conn.execute(stmt)}


def check_drift(engine: sa.Engine, scope: str, recent_of: RecentOf | None = None) -> DriftReport:
    """Drift of the active bundle: what it did since activation against its baseline.

    By default what it did is its recorded episodes; a trading bundle is judged on the
    outcomes of the decisions that ran under it (`trading_drift.recent_wins`).
    """
    with engine.connect() as conn:
        bid = persist.active_bundle_id(conn, scope)
        row = persist.bundle_row(conn, bid) if bid else None
        if row is None:
            raise KeyError(f"scope {scope!r} has no active bundle")
        recent = (recent_of or recorded_episodes)(conn, row["bundle_id"])
    baseline = {f: (int(v[0]), int(v[1])) for f, v in (row["baseline"] or {}).items()}
    return detect_drift(baseline, recent)


@dataclass(frozen=True)
class Rollback:
    """Which bundle was quarantined and which verified bundle was restored."""

    quarantined: Bundle
    restored: Bundle


def quarantine_and_rollback(engine: sa.Engine, scope: str, report: DriftReport) -> Rollback:
    """Quarantine the active bundle and restore the previous verified one, atomically.

    `restore.rollback` does it (pins verified before and after); this names the pair.
    """
    done = rollback(engine, scope, drift=report)
    return Rollback(done.quarantined, done.restored)


def replay_recorded(
    engine: sa.Engine, scope: str, env: AnyEnvironment, bundle_id: str
) -> tuple[dict[str, str], dict[str, str]]:
    """Recorded and replayed signatures of a bundle's episodes.

    The replay runs under the scope's *active* bundle; after a rollback to the bundle
    that recorded them, the two must be equal.
    """
    found = active(engine, scope)
    if found is None:
        raise KeyError(f"scope {scope!r} has no active bundle")
    bundle, structure = found
    with engine.connect() as conn:
        rows = persist.episodes_of(conn, bundle_id)
    tasks = [Task.from_dict(r["task"]) for r in rows]
    ev = replay(
        structure, env, tasks, skill_versions=_versions(bundle), index_version=bundle.index_version
    )
    return {r["task_id"]: r["signature"] for r in rows}, ev.signatures()
