"""operations: flow runs that failed or crashed for good

Revision ID: 0014_ops
Revises: 0008_fail_closed
Create Date: 2026-12-03 16:30:00

Table of `reflexmem.ledger.ops_models`: `flow_failures`, written by the flows' failure
hooks (`flows/hooks.py`). Self-contained: it only creates its own table.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014_ops"
down_revision = "0008_fail_closed"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "flow_failures",
        sa.Column("failure_id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("flow_name", sa.String(128), nullable=False),
        sa.Column("deployment", sa.String(128), nullable=True),
        sa.Column("flow_run_id", sa.String(64), nullable=False),
        sa.Column("flow_run_name", sa.String(128), nullable=True),
        sa.Column("state", sa.String(32), nullable=False),
        sa.Column("message", sa.String(4000), nullable=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("failure_id", name="pk_flow_failures"),
    )
    op.create_index("ix_flow_failures_flow_at", "flow_failures", ["flow_name", "at"])


def downgrade() -> None:
    op.drop_index("ix_flow_failures_flow_at", table_name="flow_failures")
    op.drop_table("flow_failures")
