"""Ledger reads and writes of structures: versions, lineage, searches, bundles, events.

Every function takes a connection inside the caller's transaction, so a stage's rows
commit together or not at all; rows go in as one multi-row insert per table, never one
statement per row. The rollback is the one function that insists on being inside a
transaction, because its point is that structure, skills and index move together.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

import sqlalchemy as sa

from reflexmem.ledger.structure_models import (
    ActiveBundle,
    StructureArchiveEntry,
    StructureBundle,
    StructureEpisode,
    StructureEvent,
    StructureLineage,
    StructureSearch,
    StructureVersion,
)
from reflexmem.structures.bundle import Bundle
from reflexmem.structures.model import Lifecycle, Structure
from reflexmem.structures.mutations import Step
from reflexmem.structures.refusals import Refusal
from reflexmem.structures.runtime import EpisodeResult, Task
from reflexmem.structures.schema import parse_structure

V = cast(sa.Table, StructureVersion.__table__)
L = cast(sa.Table, StructureLineage.__table__)
S = cast(sa.Table, StructureSearch.__table__)
A = cast(sa.Table, StructureArchiveEntry.__table__)
B = cast(sa.Table, StructureBundle.__table__)
P = cast(sa.Table, ActiveBundle.__table__)
EP = cast(sa.Table, StructureEpisode.__table__)
EV = cast(sa.Table, StructureEvent.__table__)


def now() -> datetime:
    """The timestamp every row of this module uses."""
    return datetime.now(UTC)


def new_id(prefix: str) -> str:
    """A fresh row ID."""
    return f"{prefix}-{uuid.uuid4().hex[:16]}"


@dataclass(frozen=True)
class StoredVersion:
    """A structure version as the ledger holds it."""

    structure: Structure
    lifecycle: str
    operator: str
    steps: tuple[Step, ...]
    mlflow_model: str | None
    mlflow_version: str | None


def save_version(
    conn: sa.Connection,
    structure: Structure,
    *,
    operator: str,
    steps: Sequence[Step] = (),
    parents: Sequence[str] = (),
    search_id: str | None = None,
    valid_at: datetime | None = None,
) -> None:
    """Insert a version and its lineage rows (one per parent).

    `valid_at` is the writing cycle's clock (the newest bar); without one the version
    is valid from its recorded write (`created_at`).
    """
    text = structure.to_yaml()
    recorded = now()
    conn.execute(
        V.insert(),
        [
            {
                "structure_id": structure.structure_id,
                "parent_id": structure.parent_id,
                "lifecycle": structure.lifecycle.value,
                "yaml": text,
                "sha256": hashlib.sha256(text.encode()).hexdigest(),
                "fingerprint": structure.fingerprint(),
                "operator": operator[:255],
                "steps": [s.to_dict() for s in steps],
                "search_id": search_id,
                "created_at": recorded,
                "valid_at": valid_at or recorded,
            }
        ],
    )
    rows = [
        {
            "child_id": structure.structure_id,
            "parent_id": p,
            "operator": operator[:255],
            "steps": [s.to_dict() for s in steps],
        }
        for p in dict.fromkeys(parents)
    ]
    if rows:
        conn.execute(L.insert(), rows)


def get_version(conn: sa.Connection, structure_id: str) -> StoredVersion | None:
    """A stored version, parsed and re-checked from its YAML."""
    row = conn.execute(sa.select(V).where(V.c.structure_id == structure_id)).mappings().first()
    if row is None:
        return None
    # Checked against its parent when written; re-parsed here (schema and own checks).
    structure = parse_structure(row["yaml"], f"ledger:structure_versions/{structure_id}")
    structure = structure.evolve(lifecycle=Lifecycle(row["lifecycle"]))
    steps = tuple(Step(s["operator"], s["args"]) for s in row["steps"] or [])
    return StoredVersion(
        structure,
        row["lifecycle"],
        row["operator"],
        steps,
        row["mlflow_model"],
        row["mlflow_version"],
    )


def has_version(conn: sa.Connection, structure_id: str) -> bool:
    """Whether a version is stored."""
    stmt = sa.select(sa.func.count()).select_from(V).where(V.c.structure_id == structure_id)
    return bool(conn.execute(stmt).scalar_one())


def set_lifecycle(conn: sa.Connection, structure_ids: Iterable[str], lifecycle: str) -> None:
    """Move versions to a lifecycle state."""
    ids = list(structure_ids)
    if ids:
        conn.execute(V.update().where(V.c.structure_id.in_(ids)).values(lifecycle=lifecycle))


def set_mlflow(conn: sa.Connection, structure_id: str, model: str, version: str) -> None:
    """Record the MLflow registered model version of a structure version."""
    conn.execute(
        V.update()
        .where(V.c.structure_id == structure_id)
        .values(mlflow_model=model, mlflow_version=version)
    )


def lineage(conn: sa.Connection, structure_id: str) -> list[dict[str, Any]]:
    """The chain of versions from `structure_id` back to its root (first parents)."""
    chain = []
    current: str | None = structure_id
    while current is not None:
        row = conn.execute(
            sa.select(V.c.structure_id, V.c.parent_id, V.c.operator, V.c.lifecycle).where(
                V.c.structure_id == current
            )
        ).first()
        if row is None:
            break
        chain.append(dict(row._mapping))
        current = row.parent_id
    return chain


def lineage_parents(conn: sa.Connection, structure_id: str) -> list[dict[str, Any]]:
    """The lineage rows of one version (one per parent)."""
    stmt = sa.select(L).where(L.c.child_id == structure_id).order_by(L.c.parent_id)
    return [dict(r) for r in conn.execute(stmt).mappings()]


def record_events(
    conn: sa.Connection,
    refusals: Sequence[Refusal] = (),
    *,
    kind: str | None = None,
    structure_id: str | None = None,
    bundle_id: str | None = None,
    reason: str = "",
    detail: dict[str, Any] | None = None,
) -> int:
    """Insert refusals (each its own event) and/or one event of `kind`; return rows."""
    at = now()
    rows: list[dict[str, Any]] = [
        {
            "kind": r.kind.value,
            "structure_id": r.structure_id,
            "bundle_id": bundle_id,
            "source": r.source,
            "field": r.field,
            "check_name": r.check,
            "reason": r.reason,
            "detail": None,
            "created_at": at,
        }
        for r in refusals
    ]
    if kind is not None:
        rows.append(
            {
                "kind": kind,
                "structure_id": structure_id,
                "bundle_id": bundle_id,
                "source": "",
                "field": "",
                "check_name": "",
                "reason": reason,
                "detail": detail,
                "created_at": at,
            }
        )
    if rows:
        conn.execute(EV.insert(), rows)
    return len(rows)


def events(conn: sa.Connection, kinds: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Events in order, optionally of some kinds."""
    stmt = sa.select(EV).order_by(EV.c.event_id)
    if kinds:
        stmt = stmt.where(EV.c.kind.in_(list(kinds)))
    return [dict(r) for r in conn.execute(stmt).mappings()]


def save_search(
    conn: sa.Connection, row: dict[str, Any], archive: Sequence[dict[str, Any]]
) -> None:
    """Insert one search row and its archive rows."""
    conn.execute(S.insert(), [{**row, "created_at": now()}])
    if archive:
        conn.execute(A.insert(), [{**a, "search_id": row["search_id"]} for a in archive])


def archive_of(conn: sa.Connection, search_id: str) -> list[dict[str, Any]]:
    """The archive rows of one search, cheapest first."""
    stmt = sa.select(A).where(A.c.search_id == search_id).order_by(A.c.cost, A.c.candidate_id)
    return [dict(r) for r in conn.execute(stmt).mappings()]


def latest_search(conn: sa.Connection) -> dict[str, Any] | None:
    """The newest search row."""
    row = conn.execute(sa.select(S).order_by(S.c.created_at.desc()).limit(1)).mappings().first()
    return None if row is None else dict(row)


def save_bundle(conn: sa.Connection, bundle: Bundle, baseline: dict[str, Any] | None) -> None:
    """Insert a bundle (state `validating`) unless it already exists."""
    exists = conn.execute(
        sa.select(sa.func.count()).select_from(B).where(B.c.bundle_id == bundle.bundle_id)
    ).scalar_one()
    if exists:
        return
    conn.execute(
        B.insert(),
        [
            {
                **bundle.to_dict(),
                "state": "validating",
                "previous_bundle_id": None,
                "baseline": baseline,
                "created_at": now(),
                "activated_at": None,
                "quarantined_at": None,
            }
        ],
    )


def bundle_row(conn: sa.Connection, bundle_id: str) -> dict[str, Any] | None:
    """One bundle row."""
    row = conn.execute(sa.select(B).where(B.c.bundle_id == bundle_id)).mappings().first()
    return None if row is None else dict(row)


def to_bundle(row: dict[str, Any]) -> Bundle:
    """A bundle row as a :class:`Bundle`."""
    return Bundle(
        row["bundle_id"],
        row["scope"],
        row["structure_id"],
        tuple(row["skill_versions"]),
        row["index_version"],
    )


def active_bundle_id(conn: sa.Connection, scope: str) -> str | None:
    """The active bundle ID of a scope."""
    return conn.execute(sa.select(P.c.bundle_id).where(P.c.scope == scope)).scalar_one_or_none()


def point_to(conn: sa.Connection, scope: str, bundle_id: str) -> None:
    """Move (or create) the scope's active pointer."""
    at = now()
    done = conn.execute(
        P.update().where(P.c.scope == scope).values(bundle_id=bundle_id, updated_at=at)
    )
    if done.rowcount == 0:
        conn.execute(P.insert(), [{"scope": scope, "bundle_id": bundle_id, "updated_at": at}])


def set_bundle(conn: sa.Connection, bundle_id: str, **values: Any) -> None:
    """Update columns of one bundle."""
    conn.execute(B.update().where(B.c.bundle_id == bundle_id).values(**values))


def save_episodes(
    conn: sa.Connection,
    bundle: Bundle,
    tasks: Sequence[Task],
    results: Sequence[EpisodeResult],
) -> list[str]:
    """Record episodes run under a bundle (one multi-row insert); return their IDs."""
    at = now()
    rows = [
        {
            "episode_id": new_id("sep"),
            "bundle_id": bundle.bundle_id,
            "structure_id": bundle.structure_id,
            "task_id": t.task_id,
            "family": t.family,
            "task": t.to_dict(),
            "outcome": r.outcome,
            "success": r.solved,
            "signature": r.signature(),
            "recorded_at": at,
        }
        for t, r in zip(tasks, results, strict=True)
    ]
    if rows:
        conn.execute(EP.insert(), rows)
    return [str(r["episode_id"]) for r in rows]


def episodes_of(conn: sa.Connection, bundle_id: str) -> list[dict[str, Any]]:
    """Episodes recorded under a bundle, in recording order."""
    stmt = sa.select(EP).where(EP.c.bundle_id == bundle_id).order_by(EP.c.recorded_at, EP.c.task_id)
    return [dict(r) for r in conn.execute(stmt).mappings()]
