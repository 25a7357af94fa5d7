"""a recall finds its step by index: ix_recall_log_namespace_step

Revision ID: 0024_recall_log_step_index
Revises: 0023_decision_structures
Create Date: 2026-12-06 23:00:00

Every recall numbers itself within its namespace (the step that seeds its Thompson
draw). It counted the namespace's earlier recalls with no index on `namespace`: a scan
of the whole log per recall, growing with every recall ever served. The step is now one
past the namespace's last, read from this index in a few page reads at any log size.
"""

from __future__ import annotations

from alembic import op

revision = "0024_recall_log_step_index"
down_revision = "0023_decision_structures"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(op.f("ix_recall_log_namespace_step"), "recall_log", ["namespace", "step"])


def downgrade() -> None:
    op.drop_index(op.f("ix_recall_log_namespace_step"), table_name="recall_log")
