"""The experience contract's columns on `episodes` (docs/design.md §10, migration 0006).

Kept apart from `models.py` so that the contract reads as one unit: identity and links,
input, decision, action, result, feedback, resources. `Episode` mixes in
`ExperienceColumns` and takes `EXPERIENCE_CONSTRAINTS` into its `__table_args__`.

The database guards what a row may say, not only the writer: a failure must name its
kind and nothing else may, a hold or request must say why, a pinned skill names both
its ID and version and that version must exist in `skill_versions`. `status` is NULL
only for rows written before the contract existed; `ExperienceRecord` (the only writer
in `reflexmem.reflex`) always sets it.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from reflexmem.ledger.reflex_enums import EpisodeStatus, FailureKind, Layer

ID = sa.String(64)


def _in(column: str, values: list[str]) -> str:
    quoted = ", ".join(f"'{v}'" for v in values)
    return f"{column} IS NULL OR {column} IN ({quoted})"


class ExperienceColumns:
    """Columns of one experience: what was asked, decided, done, observed and what it cost."""

    # identity and links (episode_id, parent_id, recorded_at live on Episode itself)
    root_id: Mapped[str | None] = mapped_column(ID, index=True)
    structure_id: Mapped[str | None] = mapped_column(ID)
    structure_version: Mapped[int | None]
    module_id: Mapped[str | None] = mapped_column(ID)
    edge_id: Mapped[str | None] = mapped_column(ID)
    # input
    goal: Mapped[str | None] = mapped_column(sa.Text)
    observation: Mapped[Any | None] = mapped_column(sa.JSON)
    source_ref: Mapped[str | None] = mapped_column(sa.Text)
    environment_version: Mapped[str | None] = mapped_column(ID)
    # decision
    skill_id: Mapped[str | None] = mapped_column(ID)
    skill_version: Mapped[int | None]
    model_version: Mapped[str | None] = mapped_column(sa.String(128))
    arguments: Mapped[Any | None] = mapped_column(sa.JSON)
    rationale: Mapped[str | None] = mapped_column(sa.Text)
    confidence: Mapped[float | None]
    escalations: Mapped[Any | None] = mapped_column(sa.JSON)
    # action
    tool: Mapped[str | None] = mapped_column(sa.String(128))
    allowed_effects: Mapped[Any | None] = mapped_column(sa.JSON)
    idempotency_key: Mapped[str | None] = mapped_column(sa.String(128), index=True)
    # result
    result: Mapped[Any | None] = mapped_column(sa.JSON)
    verifier_version: Mapped[str | None] = mapped_column(ID)
    status: Mapped[str | None] = mapped_column(sa.String(16))
    status_reason: Mapped[str | None] = mapped_column(ID)
    failure_kind: Mapped[str | None] = mapped_column(sa.String(32))
    # feedback
    feedback: Mapped[Any | None] = mapped_column(sa.JSON)
    # resources
    cost: Mapped[float | None]
    cost_detail: Mapped[Any | None] = mapped_column(sa.JSON)
    latency_ms: Mapped[float | None]
    retries: Mapped[int | None]


EXPERIENCE_CONSTRAINTS: tuple[sa.Constraint | sa.Index, ...] = (
    sa.CheckConstraint(_in("status", [s.value for s in EpisodeStatus]), name="episode_status"),
    sa.CheckConstraint(
        _in("failure_kind", [k.value for k in FailureKind]), name="episode_failure_kind"
    ),
    sa.CheckConstraint(_in("layer", [x.value for x in Layer]), name="episode_layer"),
    sa.CheckConstraint(
        "(status IS NULL AND failure_kind IS NULL)"
        " OR ((status = 'failure') = (failure_kind IS NOT NULL))",
        name="failure_is_typed",
    ),
    sa.CheckConstraint(
        "status IS NULL OR status NOT IN ('hold', 'request') OR status_reason IS NOT NULL",
        name="hold_has_reason",
    ),
    sa.CheckConstraint("(skill_id IS NULL) = (skill_version IS NULL)", name="skill_pinned"),
    sa.CheckConstraint(
        "confidence IS NULL OR (confidence >= 0 AND confidence <= 1)", name="confidence_range"
    ),
    sa.CheckConstraint(
        "(cost IS NULL OR cost >= 0) AND (latency_ms IS NULL OR latency_ms >= 0)"
        " AND (retries IS NULL OR retries >= 0)",
        name="resources_non_negative",
    ),
    sa.ForeignKeyConstraint(
        ["skill_id", "skill_version"],
        ["skill_versions.skill_id", "skill_versions.version"],
        name="fk_episodes_skill_version_skill_versions",
    ),
    sa.Index("ix_episodes_skill_version", "skill_id", "skill_version"),
    sa.Index("ix_episodes_family_status", "task_family", "status"),
)
"""Table arguments `Episode` must carry (merge them if it gains arguments of its own)."""
