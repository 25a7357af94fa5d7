"""Tables of structure versions, lineage, searches, the archive, bundles and events (0007).

A structure version row holds the exact YAML that was checked and registered, so the
ledger alone can rebuild any version; MLflow's registered model version is its public
face, and each side names the other. A bundle pins one structure version with the
skill versions and the knowledge-index version it runs with; the active bundle of a
scope is one pointer row, so a rollback is one transaction that moves the pointer and
changes states together. Refusals, drift, quarantine and rollback are `structure_events`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from reflexmem.ledger.models import ID, Base

SID = sa.String(128)
LIFECYCLES = "('candidate', 'validating', 'limited', 'active', 'quarantined', 'retired')"
BUNDLE_STATES = "('validating', 'active', 'superseded', 'quarantined')"
EVENT_KINDS = (
    "('refused_file', 'refused_mutation', 'refused_message', 'refused_scope', 'registered', "
    "'activated', 'drift', 'quarantined', 'rolled_back')"
)


class StructureVersion(Base):
    """One registered structure version: its YAML, parent, operator steps, MLflow version."""

    __tablename__ = "structure_versions"
    __table_args__ = (sa.CheckConstraint(f"lifecycle IN {LIFECYCLES}", name="lifecycle"),)

    structure_id: Mapped[str] = mapped_column(SID, primary_key=True)
    parent_id: Mapped[str | None] = mapped_column(sa.ForeignKey("structure_versions.structure_id"))
    lifecycle: Mapped[str] = mapped_column(sa.String(16))
    yaml: Mapped[str] = mapped_column(sa.Text)
    sha256: Mapped[str] = mapped_column(sa.String(64))
    fingerprint: Mapped[str] = mapped_column(sa.String(64), index=True)
    operator: Mapped[str] = mapped_column(sa.String(255))
    steps: Mapped[Any | None] = mapped_column(sa.JSON)
    search_id: Mapped[str | None] = mapped_column(ID)
    mlflow_model: Mapped[str | None] = mapped_column(sa.String(128))
    mlflow_version: Mapped[str | None] = mapped_column(sa.String(16))
    created_at: Mapped[datetime]  # wall clock of the write: the recorded time
    valid_at: Mapped[datetime | None]  # the writing cycle's clock (0020)


class StructureLineage(Base):
    """Child -> parent edges of the version graph (a recombination has two parents)."""

    __tablename__ = "structure_lineage"

    child_id: Mapped[str] = mapped_column(
        sa.ForeignKey("structure_versions.structure_id", ondelete="CASCADE"), primary_key=True
    )
    parent_id: Mapped[str] = mapped_column(SID, primary_key=True)
    operator: Mapped[str] = mapped_column(sa.String(255))
    steps: Mapped[Any | None] = mapped_column(sa.JSON)


class StructureSearch(Base):
    """One run of the selection loop: budget used, floors, controls, final test."""

    __tablename__ = "structure_searches"

    search_id: Mapped[str] = mapped_column(ID, primary_key=True)
    parent_id: Mapped[str] = mapped_column(sa.ForeignKey("structure_versions.structure_id"))
    environment: Mapped[str] = mapped_column(sa.String(64))
    cost_model: Mapped[str] = mapped_column(sa.String(32))
    winner_fingerprint: Mapped[str] = mapped_column(sa.String(64))
    winner_id: Mapped[str | None] = mapped_column(SID)
    registered: Mapped[bool]
    generations: Mapped[int]
    generated: Mapped[int]
    refused: Mapped[int]
    evaluated: Mapped[int]
    wall_s: Mapped[float]
    floors: Mapped[Any] = mapped_column(sa.JSON)
    frozen_parent: Mapped[Any] = mapped_column(sa.JSON)
    stats: Mapped[Any] = mapped_column(sa.JSON)
    history: Mapped[Any] = mapped_column(sa.JSON)
    controls: Mapped[Any | None] = mapped_column(sa.JSON)
    final_test: Mapped[Any | None] = mapped_column(sa.JSON)
    mlflow_run_id: Mapped[str | None] = mapped_column(sa.String(64))
    created_at: Mapped[datetime]


class StructureArchiveEntry(Base):
    """A non-dominated candidate of one search, with its scores and lineage."""

    __tablename__ = "structure_archive"

    search_id: Mapped[str] = mapped_column(
        sa.ForeignKey("structure_searches.search_id", ondelete="CASCADE"), primary_key=True
    )
    candidate_id: Mapped[str] = mapped_column(SID, primary_key=True)
    fingerprint: Mapped[str] = mapped_column(sa.String(64))
    yaml: Mapped[str] = mapped_column(sa.Text)
    success: Mapped[Any] = mapped_column(sa.JSON)
    cost: Mapped[float]
    passes_floor: Mapped[bool]
    generation: Mapped[int]
    parent_candidate: Mapped[str | None] = mapped_column(SID)
    lineage: Mapped[Any | None] = mapped_column(sa.JSON)


class StructureBundle(Base):
    """A structure version pinned with its skill versions and knowledge-index version."""

    __tablename__ = "structure_bundles"
    __table_args__ = (sa.CheckConstraint(f"state IN {BUNDLE_STATES}", name="bundle_state"),)

    bundle_id: Mapped[str] = mapped_column(ID, primary_key=True)
    scope: Mapped[str] = mapped_column(sa.String(64), index=True)
    structure_id: Mapped[str] = mapped_column(sa.ForeignKey("structure_versions.structure_id"))
    skill_versions: Mapped[Any] = mapped_column(sa.JSON)
    index_version: Mapped[str] = mapped_column(sa.String(128))
    state: Mapped[str] = mapped_column(sa.String(16))
    previous_bundle_id: Mapped[str | None] = mapped_column(ID)
    baseline: Mapped[Any | None] = mapped_column(sa.JSON)
    created_at: Mapped[datetime]
    activated_at: Mapped[datetime | None]
    quarantined_at: Mapped[datetime | None]


class ActiveBundle(Base):
    """The one active bundle of a scope (moving it is the activation and the rollback)."""

    __tablename__ = "structure_active_bundles"

    scope: Mapped[str] = mapped_column(sa.String(64), primary_key=True)
    bundle_id: Mapped[str] = mapped_column(sa.ForeignKey("structure_bundles.bundle_id"))
    updated_at: Mapped[datetime]


class StructureEpisode(Base):
    """An episode run under a bundle: the task and the result a replay must reproduce."""

    __tablename__ = "structure_episodes"

    episode_id: Mapped[str] = mapped_column(ID, primary_key=True)
    bundle_id: Mapped[str] = mapped_column(sa.ForeignKey("structure_bundles.bundle_id"), index=True)
    structure_id: Mapped[str] = mapped_column(SID)
    task_id: Mapped[str] = mapped_column(SID)
    family: Mapped[str] = mapped_column(sa.String(64))
    task: Mapped[Any] = mapped_column(sa.JSON)
    outcome: Mapped[str] = mapped_column(sa.String(16))
    success: Mapped[bool]
    signature: Mapped[str] = mapped_column(sa.Text)
    recorded_at: Mapped[datetime]


class StructureEvent(Base):
    """A refusal, registration, activation, drift, quarantine or rollback."""

    __tablename__ = "structure_events"
    __table_args__ = (sa.CheckConstraint(f"kind IN {EVENT_KINDS}", name="event_kind"),)

    event_id: Mapped[int] = mapped_column(primary_key=True, autoincrement=True)
    kind: Mapped[str] = mapped_column(sa.String(24), index=True)
    structure_id: Mapped[str | None] = mapped_column(SID, index=True)
    bundle_id: Mapped[str | None] = mapped_column(ID)
    source: Mapped[str] = mapped_column(sa.Text, default="")
    field: Mapped[str] = mapped_column(sa.Text, default="")
    check_name: Mapped[str] = mapped_column(sa.String(64), default="")
    reason: Mapped[str] = mapped_column(sa.Text, default="")
    detail: Mapped[Any | None] = mapped_column(sa.JSON)
    created_at: Mapped[datetime]


class DecisionStructure(Base):
    """The bundle a decision's pre-decision check ran under (structure, skill and index pins).

    Written by the check stage for every decision it judges while the `trading` scope
    has an active bundle; `reflexmem lineage` shows it as the decision's `structure` step.
    """

    __tablename__ = "decision_structures"

    decision_id: Mapped[str] = mapped_column(
        sa.ForeignKey("trading_decisions.decision_id", ondelete="CASCADE"), primary_key=True
    )
    bundle_id: Mapped[str] = mapped_column(sa.ForeignKey("structure_bundles.bundle_id"), index=True)
    structure_id: Mapped[str] = mapped_column(SID)
    checked_at: Mapped[datetime]
