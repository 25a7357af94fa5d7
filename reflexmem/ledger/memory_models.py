"""Ledger tables of tiered memory, retrieval policies, bandit posteriors and recall.

They sit beside the core ledger models (same `Base`, same naming convention) so that the
ledger's metadata knows every table, but in their own module so that the core schema
stays readable. Full-text indexes are *not* mapped here: the SQLite FTS5 table and the
PostgreSQL tsvector column are search accelerators created by migration 0002, and the
ORM must never treat them as data (`Base.metadata` would try to truncate or create them).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from reflexmem.ledger.enums import EntryState, Tier
from reflexmem.ledger.models import Base

ENTRY_ID = sa.String(255)
NAMESPACE = sa.String(128)


def _checked(values: tuple[str, ...], name: str) -> sa.Enum:
    return sa.Enum(
        *values,
        name=name,
        native_enum=False,
        create_constraint=True,
        length=max(len(v) for v in values),
        validate_strings=True,
    )


TIER_TYPE = _checked(tuple(t.value for t in Tier), "memory_tier")
ENTRY_STATE_TYPE = _checked(tuple(s.value for s in EntryState), "memory_state")


class MemoryNamespace(Base):
    """Per-namespace counters, and the learning state recording needs between batches.

    ``learning`` (JSON, migration 0004b) is ``{"agent": id, "recent": [[episode, policy,
    reward], ...]}``: the agent that learns in this namespace and the rewards of its
    learning episodes that the open window's FCC credit and the next evolution gates
    still need (at most one gate span, 50 episodes by default). Keeping them here means
    a gate check never re-reads the `episodes` table.
    """

    __tablename__ = "memory_namespaces"

    namespace: Mapped[str] = mapped_column(NAMESPACE, primary_key=True)
    next_episode: Mapped[int] = mapped_column(default=0, server_default="0")
    clock: Mapped[int] = mapped_column(default=0, server_default="0")
    learning: Mapped[Any | None] = mapped_column(sa.JSON(none_as_null=True))
    updated_at: Mapped[datetime]


class MemoryEntryRow(Base):
    """One `reflexmem.memory.MemoryEntry`, persisted field for field."""

    __tablename__ = "memory_entries"
    __table_args__ = (
        sa.Index("ix_memory_entries_ns_tier_state", "namespace", "tier", "state"),
        sa.CheckConstraint("quality >= 0 AND quality <= 1", name="quality_unit"),
    )

    entry_id: Mapped[str] = mapped_column(ENTRY_ID, primary_key=True)
    namespace: Mapped[str] = mapped_column(NAMESPACE)
    tier: Mapped[str] = mapped_column(TIER_TYPE)
    state: Mapped[str] = mapped_column(ENTRY_STATE_TYPE)
    text: Mapped[str] = mapped_column(sa.Text, default="")
    tags: Mapped[Any] = mapped_column(sa.JSON)
    quality: Mapped[float]
    created_episode: Mapped[int]
    source_ids: Mapped[Any] = mapped_column(sa.JSON)
    source_kind: Mapped[str | None] = mapped_column(sa.String(16))
    support: Mapped[int] = mapped_column(default=1)
    confidence: Mapped[float] = mapped_column(default=1.0)
    window_key: Mapped[str | None] = mapped_column(ENTRY_ID)
    outcome: Mapped[float | None]
    wins: Mapped[int] = mapped_column(default=0, server_default="0")
    losses: Mapped[int] = mapped_column(default=0, server_default="0")
    first_episode: Mapped[int | None]
    stats: Mapped[Any | None] = mapped_column(sa.JSON(none_as_null=True))
    created_at: Mapped[datetime]
    superseded_at: Mapped[datetime | None]
    superseded_episode: Mapped[int | None]
    """The namespace's episode clock when the version was superseded (valid time: a
    recall as of T counts it live while T's episode clock is below this)."""
    mlflow_run_id: Mapped[str | None] = mapped_column(sa.String(64))
    """The distillation run (`memory-distillation`) that wrote or last moved this version."""


class MemorySource(Base):
    """Link from a memory entry to a source it was made from (case, episode or entry)."""

    __tablename__ = "memory_sources"

    entry_id: Mapped[str] = mapped_column(
        sa.ForeignKey("memory_entries.entry_id", ondelete="CASCADE"), primary_key=True
    )
    source_id: Mapped[str] = mapped_column(ENTRY_ID, primary_key=True, index=True)


class MemoryWindow(Base):
    """A processed distillation window: its key is what makes a re-run write nothing."""

    __tablename__ = "memory_windows"

    namespace: Mapped[str] = mapped_column(NAMESPACE, primary_key=True)
    window_key: Mapped[str] = mapped_column(ENTRY_ID, primary_key=True)
    processed_at: Mapped[datetime]


class RetrievalPolicyRow(Base):
    """A retrieval policy (an arm) of one agent, as data, in bandit-arm order."""

    __tablename__ = "retrieval_policies"

    agent_id: Mapped[str] = mapped_column(NAMESPACE, primary_key=True)
    name: Mapped[str] = mapped_column(sa.String(128), primary_key=True)
    position: Mapped[int]
    spec: Mapped[Any] = mapped_column(sa.JSON)
    parent: Mapped[str | None] = mapped_column(sa.String(128))
    generation: Mapped[int] = mapped_column(default=0)
    reason: Mapped[str | None] = mapped_column(sa.Text)
    created_at: Mapped[datetime]


class BanditStateRow(Base):
    """Beta(alpha, beta) posterior of one agent's policy; a new arm starts at Beta(1, 1)."""

    __tablename__ = "bandit_states"
    __table_args__ = (sa.CheckConstraint("alpha > 0 AND beta > 0", name="positive"),)

    agent_id: Mapped[str] = mapped_column(NAMESPACE, primary_key=True)
    policy: Mapped[str] = mapped_column(sa.String(128), primary_key=True)
    position: Mapped[int]
    alpha: Mapped[float] = mapped_column(default=1.0)
    beta: Mapped[float] = mapped_column(default=1.0)
    pulls: Mapped[int] = mapped_column(default=0)
    updated_at: Mapped[datetime]


class CaseReflection(Base):
    """When a role case became `reflected`; maintained by a trigger (migration 0002).

    Recall "as of T" needs the time a lesson came to exist, which `role_cases` does not
    record: the trigger stamps it whatever code moves the case, so no writer can forget.
    """

    __tablename__ = "case_reflections"

    case_id: Mapped[str] = mapped_column(
        sa.ForeignKey("role_cases.case_id", ondelete="CASCADE"), primary_key=True
    )
    reflected_at: Mapped[datetime]


class CaseEmbedding(Base):
    """An embedding of a role case's text for one model (numpy backend: float32 bytes).

    On PostgreSQL with pgvector, migration 0002 adds an unmapped `vec vector` column
    that the pgvector backend fills instead; the mapping stays backend-neutral.
    """

    __tablename__ = "case_embeddings"

    case_id: Mapped[str] = mapped_column(
        sa.ForeignKey("role_cases.case_id", ondelete="CASCADE"), primary_key=True
    )
    model: Mapped[str] = mapped_column(sa.String(64), primary_key=True)
    dim: Mapped[int]
    vector: Mapped[bytes | None] = mapped_column(sa.LargeBinary)


class RecallLog(Base):
    """One recall an agent made: which retrieval policy served which decision.

    The policy was Thompson-sampled from the namespace's bandit when the agent asked;
    when that decision's case is later recorded as an episode, its outcome credits this
    policy. `hits` keeps the IDs returned, so a reviewer can see what the agent was shown.
    `step` numbers the namespace's recalls (one past its last; it seeds the draw).
    `decision_id` is not a foreign key: an agent recalls *before* it records the
    decision the recall informs.
    """

    __tablename__ = "recall_log"
    __table_args__ = (sa.Index("ix_recall_log_namespace_step", "namespace", "step"),)

    recall_id: Mapped[str] = mapped_column(sa.String(64), primary_key=True)
    namespace: Mapped[str] = mapped_column(NAMESPACE)
    decision_id: Mapped[str | None] = mapped_column(sa.String(64), index=True)
    policy: Mapped[str] = mapped_column(sa.String(128))
    step: Mapped[int]
    hits: Mapped[Any] = mapped_column(sa.JSON)
    as_of: Mapped[datetime | None]
    recalled_at: Mapped[datetime]
