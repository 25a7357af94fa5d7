"""the bundle a decision's check ran under: decision_structures

Revision ID: 0023_decision_structures
Revises: 0022_search_when_reflected
Create Date: 2026-12-06 18:00:00

A trading structure pins each role's checks, what one role lends another over an edge,
and the memory index; while the `trading` scope has an active bundle, the check stage
records, for every decision it judges, the bundle it ran under. `reflexmem lineage`
then ends a decision's chain at its structure version and MLflow model version.
Decisions checked before this revision have no row: they ran under no trading bundle.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0023_decision_structures"
down_revision = "0022_search_when_reflected"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "decision_structures",
        sa.Column("decision_id", sa.String(length=64), nullable=False),
        sa.Column("bundle_id", sa.String(length=64), nullable=False),
        sa.Column("structure_id", sa.String(length=128), nullable=False),
        sa.Column("checked_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["decision_id"],
            ["trading_decisions.decision_id"],
            name=op.f("fk_decision_structures_decision_id_trading_decisions"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["bundle_id"],
            ["structure_bundles.bundle_id"],
            name=op.f("fk_decision_structures_bundle_id_structure_bundles"),
        ),
        sa.PrimaryKeyConstraint("decision_id", name=op.f("pk_decision_structures")),
    )
    op.create_index(op.f("ix_decision_structures_bundle_id"), "decision_structures", ["bundle_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_decision_structures_bundle_id"), table_name="decision_structures")
    op.drop_table("decision_structures")
