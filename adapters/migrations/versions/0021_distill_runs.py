"""distillation run of a memory entry: memory_entries.mlflow_run_id

Revision ID: 0021_distill_runs
Revises: 0020_version_clocks
Create Date: 2026-12-06 08:00:00

Every batch of distilled windows is an MLflow run (`memory-distillation`); the pattern
and rule versions it wrote or moved now name that run, so `reflexmem lineage` links a
decision's pattern and rule steps to the run that made them (as it links evaluations
and reflections), with no search over tags. Existing rows stay null: their runs can
still be found by the run's `reflexmem.pattern_ids` / `reflexmem.rule_ids` tags.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0021_distill_runs"
down_revision = "0020_version_clocks"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("memory_entries", sa.Column("mlflow_run_id", sa.String(64)))


def downgrade() -> None:
    # SQLite >= 3.35 drops a column in place
    op.drop_column("memory_entries", "mlflow_run_id")
