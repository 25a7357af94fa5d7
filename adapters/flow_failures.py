"""Writes and reads the ledger's `flow_failures` (the flows' failure hooks, doctor/audit).

Opens its own short-lived engine on the given URL: a hook runs after a flow failed,
possibly because its resources could not be built, so it never goes through
`resources_for`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa

from adapters.db import make_engine
from reflexmem.ledger.ops_models import FlowFailure, record_failure


def write_failure(url: str, **row: Any) -> int:
    """Insert one `flow_failures` row on the ledger at `url`; returns its ID."""
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            return record_failure(conn, **row)
    finally:
        engine.dispose()


def recent_failures(url: str, since: datetime | None = None) -> list[dict[str, Any]]:
    """The recorded failures (newest first), optionally since a time."""
    engine = make_engine(url)
    query = sa.select(FlowFailure).order_by(FlowFailure.at.desc())
    if since is not None:
        query = query.where(FlowFailure.at >= since)
    try:
        with engine.connect() as conn:
            return [
                dict(r._mapping)
                for r in conn.execute(query.with_only_columns(*FlowFailure.__table__.columns))
            ]
    finally:
        engine.dispose()
