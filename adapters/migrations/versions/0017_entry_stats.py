"""entry stats: the outcome figures of condition patterns and rules

Revision ID: 0017_entry_stats
Revises: 0016_backfill
Create Date: 2026-12-04 23:30:00

`memory_entries` gains `stats` (JSON, nullable): the carriers' outcome moments of a
condition pattern, the contrast that screened it, and a rule's confirmation test with
its helpful / harmful counts (`reflexmem.memory.outcome_rules`). Existing rows keep
NULL: they were learned before rules were tested on outcomes.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017_entry_stats"
down_revision = "0016_backfill"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("memory_entries") as batch:
        batch.add_column(sa.Column("stats", sa.JSON(none_as_null=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("memory_entries") as batch:
        batch.drop_column("stats")
