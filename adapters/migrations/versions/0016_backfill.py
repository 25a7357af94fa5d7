"""backfill: the cycle clocks a backfill has finished

Revision ID: 0016_backfill
Revises: 0015_legacy
Create Date: 2026-12-04 21:00:00

Table of `reflexmem.ledger.ops_models`: `backfill_clocks`, one row per clock a
`reflexmem backfill` finished, so that re-running it resumes after the last one.
Self-contained: it only creates its own table; existing ledgers gain an empty table.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016_backfill"
down_revision = "0015_legacy"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "backfill_clocks",
        sa.Column("backfill_key", sa.String(64), nullable=False),
        sa.Column("as_of", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("backfill_key", "as_of", name="pk_backfill_clocks"),
    )


def downgrade() -> None:
    op.drop_table("backfill_clocks")
