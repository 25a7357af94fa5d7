"""The experience contract (docs/design.md §10): one typed record per episode, validated first.

`ExperienceRecord` carries every field of the contract: IDs and parents; structure,
module and edge IDs; goal, observation, task family, environment version; layer, skill
and model versions, arguments, rationale; tool, allowed effects, idempotency key;
result, verifier version, status; feedback; cost, latency, retries. Its validators
state the same invariants as the CHECK constraints of migration 0006, so a bad record
is refused in Python with the field named, before the database would refuse it:

* a `failure` names its kind (input interpretation, policy, execution, verification),
  and nothing else does;
* a `hold` or `request` says why (`status_reason`), and a `request` lists what is missing;
* a skill is pinned as ID and version together; layers L0-L2 decide only through a skill;
* an L3 `success` names the model version: model inference is never recorded as
  success without a model having answered.

`write_experiences` appends records in one statement on the caller's connection.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, cast

import sqlalchemy as sa
from pydantic import BaseModel, ConfigDict, Field, model_validator

from reflexmem.ledger.models import Episode
from reflexmem.ledger.reflex_enums import EpisodeStatus, FailureKind, Layer

EPISODES = cast(sa.Table, Episode.__table__)


class ExperienceRecord(BaseModel):
    """One episode of the experience ledger."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    episode_id: str = Field(min_length=1, max_length=64)
    agent_id: str = Field(min_length=1, max_length=64)
    parent_id: str | None = Field(default=None, max_length=64)
    root_id: str | None = Field(default=None, max_length=64)
    decision_id: str | None = Field(default=None, max_length=64)
    structure_id: str | None = Field(default=None, max_length=64)
    structure_version: int | None = Field(default=None, ge=1)
    module_id: str | None = Field(default=None, max_length=64)
    edge_id: str | None = Field(default=None, max_length=64)
    goal: str | None = None
    observation: dict[str, Any] | None = None
    source_ref: str | None = None
    task_family: str = Field(min_length=1, max_length=64)
    environment_version: str | None = Field(default=None, max_length=64)
    layer: Layer | None = None
    skill_id: str | None = Field(default=None, max_length=64)
    skill_version: int | None = Field(default=None, ge=1)
    model_version: str | None = Field(default=None, max_length=128)
    arguments: dict[str, Any] | None = None
    rationale: str | None = None
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    escalations: list[dict[str, Any]] = Field(default_factory=list)
    tool: str | None = Field(default=None, max_length=128)
    allowed_effects: list[str] | None = None
    idempotency_key: str | None = Field(default=None, max_length=128)
    result: dict[str, Any] | None = None
    verifier_version: str | None = Field(default=None, max_length=64)
    status: EpisodeStatus
    status_reason: str | None = Field(default=None, max_length=64)
    failure_kind: FailureKind | None = None
    feedback: dict[str, Any] | None = None
    outcome: float | None = Field(default=None, ge=-1.0, le=1.0)
    cost: float = Field(default=0.0, ge=0.0)
    cost_detail: dict[str, float] | None = None
    latency_ms: float = Field(default=0.0, ge=0.0)
    retries: int = Field(default=0, ge=0)
    recorded_at: datetime = Field(default_factory=lambda: datetime.now(UTC))

    @model_validator(mode="after")
    def _contract(self) -> ExperienceRecord:
        if (self.status == EpisodeStatus.FAILURE) != (self.failure_kind is not None):
            raise ValueError("failure_kind is set exactly when status is failure")
        if self.status in (EpisodeStatus.HOLD, EpisodeStatus.REQUEST) and not self.status_reason:
            raise ValueError(f"a {self.status} episode needs a status_reason")
        if self.status == EpisodeStatus.REQUEST and not (self.result or {}).get("missing"):
            raise ValueError("a request episode lists what is missing in result.missing")
        if (self.skill_id is None) != (self.skill_version is None):
            raise ValueError("skill_id and skill_version are set together")
        decided = self.status in (EpisodeStatus.SUCCESS, EpisodeStatus.FAILURE)
        if self.layer in (Layer.L0, Layer.L1, Layer.L2) and self.skill_id is None and decided:
            raise ValueError(f"{self.layer} decides only through a pinned skill version")
        if (
            self.layer == Layer.L3
            and self.status == EpisodeStatus.SUCCESS
            and not self.model_version
        ):
            raise ValueError("an L3 success needs the model version that answered")
        if self.tool is not None and self.allowed_effects is None:
            raise ValueError("a tool call records the effects it was allowed")
        return self

    def row(self) -> dict[str, Any]:
        """The record as an `episodes` row."""
        data = self.model_dump(mode="python")
        for name in ("layer", "status", "failure_kind"):
            value = data[name]
            data[name] = None if value is None else str(value)
        return data


def write_experiences(conn: sa.Connection, records: Sequence[ExperienceRecord]) -> int:
    """Append validated records to `episodes` (one executemany); returns the count."""
    if not records:
        return 0
    conn.execute(EPISODES.insert(), [r.row() for r in records])
    return len(records)


def read_experience(conn: sa.Connection, episode_id: str) -> ExperienceRecord:
    """One episode back as a record (`KeyError` if absent)."""
    row = conn.execute(sa.select(EPISODES).where(EPISODES.c.episode_id == episode_id)).one_or_none()
    if row is None:
        raise KeyError(f"episode {episode_id!r} is not in the ledger")
    data = {k: v for k, v in row._mapping.items() if k in ExperienceRecord.model_fields}
    data["escalations"] = data.get("escalations") or []
    if data["recorded_at"].tzinfo is None:
        data["recorded_at"] = data["recorded_at"].replace(tzinfo=UTC)
    return ExperienceRecord.model_validate(data)
