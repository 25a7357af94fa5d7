"""One step of a decision's chain (`reflexmem lineage`) and the SQL helpers its walkers share.

A step says what it is, its ledger ID, where MLflow has it, its details and, for the
steps that carry them, its valid time and recorded time (`reflexmem.recall.clocks`).
Kept apart from `adapters.lineage` so the walkers of the learned steps
(`adapters.lineage_learned`) and the chain itself share it without an import cycle.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from reflexmem.operations.cycle import plain
from reflexmem.recall.clocks import Times


@dataclass(frozen=True)
class Step:
    """One link of the chain: what it is, its ledger ID, where MLflow has it, details."""

    kind: str
    id: str
    mlflow_run_id: str | None = None
    url: str | None = None
    detail: Mapping[str, Any] = field(default_factory=dict)
    times: Times = (None, None)

    def as_json(self) -> dict[str, Any]:
        """`{"kind", "id", "mlflow_run_id", "url", "valid_at", "recorded_at", ...details}`."""
        out: dict[str, Any] = {
            "kind": self.kind,
            "id": self.id,
            "mlflow_run_id": self.mlflow_run_id,
            "url": self.url,
            "valid_at": plain(self.times[0]),
            "recorded_at": plain(self.times[1]),
        }
        out.update(plain(dict(self.detail)))
        return out


def rows(conn: sa.Connection, sql: str, **params: Any) -> list[dict[str, Any]]:
    """The rows of a parameterised SQL text, as dicts."""
    return [dict(r._mapping) for r in conn.execute(sa.text(sql), params)]


def json_value(value: Any) -> Any:
    """A JSON column's value (SQLite text drivers hand back the string)."""
    return json.loads(value) if isinstance(value, str) else value
