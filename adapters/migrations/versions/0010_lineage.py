"""lineage: reflection batches' MLflow runs, and which batch reflected each case

Revision ID: 0010_lineage
Revises: 0007_structures
Create Date: 2026-12-03 14:00:00

`reflection_batches.mlflow_run_id` is the ledger end of the link to the batch's run in
the MLflow `reflection-runs` experiment (the run's `reflexmem.batch_id` tag is the other
end), and `reflection_batch_cases` names the batch whose verdict each reflected (or
failed) case carries, so a reviewer can walk from a decision to its reflection run.
Self-contained: one added nullable column and one new table.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010_lineage"
down_revision = "0007_structures"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("reflection_batches", schema=None) as batch_op:
        batch_op.add_column(sa.Column("mlflow_run_id", sa.String(64), nullable=True))
    op.create_table(
        "reflection_batch_cases",
        sa.Column("case_id", sa.String(80), nullable=False),
        sa.Column("batch_id", sa.String(64), nullable=False),
        sa.ForeignKeyConstraint(
            ["case_id"],
            ["role_cases.case_id"],
            name=op.f("fk_reflection_batch_cases_case_id_role_cases"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["batch_id"],
            ["reflection_batches.batch_id"],
            name=op.f("fk_reflection_batch_cases_batch_id_reflection_batches"),
        ),
        sa.PrimaryKeyConstraint("case_id", name=op.f("pk_reflection_batch_cases")),
    )
    op.create_index(
        op.f("ix_reflection_batch_cases_batch_id"), "reflection_batch_cases", ["batch_id"]
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_reflection_batch_cases_batch_id"), table_name="reflection_batch_cases")
    op.drop_table("reflection_batch_cases")
    with op.batch_alter_table("reflection_batches", schema=None) as batch_op:
        batch_op.drop_column("mlflow_run_id")
