"""The review queue: inputs the router would not guess at, until a person decides.

One row per distinct cause (kind, task family, fingerprint): the thousandth filing in
the same new format adds an occurrence and moves `last_seen_at`, it does not add a row.
A resolved cause stays resolved when seen again (its occurrences still count), so a
reviewer's verdict is not undone by the traffic that prompted it. Resolution is one
compare-and-set on `status = 'open'`: resolving twice, or an unknown ID, is an error.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from reflexmem.ledger.reflex_enums import ReviewKind, ReviewResolution, ReviewStatus
from reflexmem.ledger.reflex_models import ReviewItem
from reflexmem.reflex.router import ReviewRequest

QUEUE = cast(sa.Table, ReviewItem.__table__)


class ReviewError(ValueError):
    """A resolution was refused (unknown item, already resolved, bad verdict)."""


@dataclass(frozen=True)
class ReviewEntry:
    """One queued cause as a reviewer sees it."""

    review_id: int
    kind: ReviewKind
    task_family: str
    environment_version: str | None
    fingerprint: str
    detail: dict[str, Any]
    occurrences: int
    first_episode_id: str | None
    last_episode_id: str | None
    status: ReviewStatus
    resolution: ReviewResolution | None
    resolution_note: str | None
    resolved_by: str | None
    first_seen_at: datetime
    last_seen_at: datetime
    resolved_at: datetime | None


def enqueue(
    conn: sa.Connection,
    request: ReviewRequest,
    episode_id: str | None,
    *,
    now: datetime | None = None,
) -> int:
    """Add the cause, or count one more occurrence of it; returns its review ID."""
    now = now or datetime.now(UTC)
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    row = {
        "kind": request.kind.value,
        "task_family": request.task_family,
        "fingerprint": request.fingerprint,
        "environment_version": request.environment_version,
        "detail": dict(request.detail),
        "first_episode_id": episode_id,
        "last_episode_id": episode_id,
        "occurrences": 1,
        "status": ReviewStatus.OPEN.value,
        "first_seen_at": now,
        "last_seen_at": now,
    }
    insert = dialect.insert(QUEUE).values(**row)
    stmt = insert.on_conflict_do_update(
        index_elements=["kind", "task_family", "fingerprint"],
        set_={
            "occurrences": QUEUE.c.occurrences + 1,
            "last_seen_at": insert.excluded.last_seen_at,
            "last_episode_id": insert.excluded.last_episode_id,
        },
    ).returning(QUEUE.c.review_id)
    return int(conn.execute(stmt).scalar_one())


def _entry(row: sa.Row[Any]) -> ReviewEntry:
    return ReviewEntry(
        review_id=row.review_id,
        kind=ReviewKind(row.kind),
        task_family=row.task_family,
        environment_version=row.environment_version,
        fingerprint=row.fingerprint,
        detail=dict(row.detail or {}),
        occurrences=row.occurrences,
        first_episode_id=row.first_episode_id,
        last_episode_id=row.last_episode_id,
        status=ReviewStatus(row.status),
        resolution=None if row.resolution is None else ReviewResolution(row.resolution),
        resolution_note=row.resolution_note,
        resolved_by=row.resolved_by,
        first_seen_at=row.first_seen_at,
        last_seen_at=row.last_seen_at,
        resolved_at=row.resolved_at,
    )


def list_reviews(
    conn: sa.Connection,
    *,
    status: ReviewStatus | None = ReviewStatus.OPEN,
    task_family: str | None = None,
) -> list[ReviewEntry]:
    """Queued causes (open ones by default), most occurrences first."""
    query = sa.select(QUEUE)
    if status is not None:
        query = query.where(QUEUE.c.status == status.value)
    if task_family is not None:
        query = query.where(QUEUE.c.task_family == task_family)
    query = query.order_by(QUEUE.c.occurrences.desc(), QUEUE.c.review_id)
    return [_entry(r) for r in conn.execute(query)]


def resolve_review(
    conn: sa.Connection,
    review_id: int,
    resolution: ReviewResolution | str,
    *,
    note: str,
    actor: str,
    now: datetime | None = None,
) -> ReviewEntry:
    """Record a reviewer's verdict on an open item; refused if it is unknown or closed."""
    try:
        verdict = ReviewResolution(resolution)
    except ValueError as exc:
        allowed = ", ".join(r.value for r in ReviewResolution)
        raise ReviewError(f"resolution {resolution!r} is not one of {allowed}") from exc
    if not note.strip():
        raise ReviewError("a resolution needs a note saying why")
    changed = conn.execute(
        QUEUE.update()
        .where(QUEUE.c.review_id == review_id, QUEUE.c.status == ReviewStatus.OPEN.value)
        .values(
            status=ReviewStatus.RESOLVED.value,
            resolution=verdict.value,
            resolution_note=note,
            resolved_by=actor,
            resolved_at=now or datetime.now(UTC),
        )
    ).rowcount
    row = conn.execute(sa.select(QUEUE).where(QUEUE.c.review_id == review_id)).one_or_none()
    if row is None:
        raise ReviewError(f"review item {review_id} does not exist")
    if changed != 1:
        raise ReviewError(f"review item {review_id} is already resolved ({row.resolution})")
    return _entry(row)


def enqueue_all(
    conn: sa.Connection, requests: Sequence[ReviewRequest], episode_id: str | None
) -> list[int]:
    """Enqueue every cause of one episode."""
    return [enqueue(conn, r, episode_id) for r in requests]
