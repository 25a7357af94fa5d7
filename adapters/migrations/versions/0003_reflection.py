"""evaluation lineage, promotions, reflection budget, executor audit, role locks

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-03 10:00:00

Tables of `reflexmem.ledger.reflection_models`: evaluation batches (one per MLflow run),
per-run lineage (batch, case, role, replay_of), explicit promotions, the daily model
budget of reflection, one summary row per reflection batch, the executor's audit of
every tool call a reflector attempted, and the per-role lock row.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

ID = sa.String(64)


def upgrade() -> None:
    op.create_table(
        "evaluation_batches",
        sa.Column("batch_id", ID, nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("profile", sa.String(64), nullable=False),
        sa.Column("profile_version", sa.Integer(), nullable=False),
        sa.Column("roles", sa.JSON(), nullable=True),
        sa.Column("n_runs", sa.Integer(), nullable=False),
        sa.Column("mlflow_run_id", sa.String(64), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "kind IN ('evaluate', 'replay', 'promote')",
            name=op.f("ck_evaluation_batches_batch_kind"),
        ),
        sa.PrimaryKeyConstraint("batch_id", name=op.f("pk_evaluation_batches")),
    )
    op.create_table(
        "evaluation_run_lineage",
        sa.Column("run_id", ID, nullable=False),
        sa.Column("batch_id", ID, nullable=False),
        sa.Column("case_id", sa.String(80), nullable=True),
        sa.Column("role_id", ID, nullable=False),
        sa.Column("replay_of", ID, nullable=True),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["evaluation_runs.run_id"],
            name=op.f("fk_evaluation_run_lineage_run_id_evaluation_runs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("run_id", name=op.f("pk_evaluation_run_lineage")),
    )
    op.create_index(
        op.f("ix_evaluation_run_lineage_batch_id"), "evaluation_run_lineage", ["batch_id"]
    )
    op.create_index(
        op.f("ix_evaluation_run_lineage_role_id"), "evaluation_run_lineage", ["role_id"]
    )
    op.create_table(
        "evaluation_promotions",
        sa.Column("promotion_id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("batch_id", ID, nullable=False),
        sa.Column("decision_id", ID, nullable=False),
        sa.Column("profile", sa.String(64), nullable=False),
        sa.Column("run_id", ID, nullable=False),
        sa.Column("previous_run_id", ID, nullable=True),
        sa.Column("promoted_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("promotion_id", name=op.f("pk_evaluation_promotions")),
    )
    op.create_index(
        op.f("ix_evaluation_promotions_batch_id"), "evaluation_promotions", ["batch_id"]
    )
    op.create_index(
        op.f("ix_evaluation_promotions_decision_id"), "evaluation_promotions", ["decision_id"]
    )
    op.create_table(
        "reflection_budget_usage",
        sa.Column("day", sa.String(10), nullable=False),
        sa.Column("calls", sa.Integer(), nullable=False),
        sa.Column("tokens", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("day", name=op.f("pk_reflection_budget_usage")),
    )
    op.create_table(
        "reflection_batches",
        sa.Column("batch_id", ID, nullable=False),
        sa.Column("role_id", ID, nullable=False),
        sa.Column("reflector", sa.String(32), nullable=False),
        sa.Column("offered", sa.Integer(), nullable=False),
        sa.Column("reflected", sa.Integer(), nullable=False),
        sa.Column("failed", sa.Integer(), nullable=False),
        sa.Column("deferred", sa.Integer(), nullable=False),
        sa.Column("lessons", sa.Integer(), nullable=False),
        sa.Column("model_calls", sa.Integer(), nullable=False),
        sa.Column("tokens", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("batch_id", name=op.f("pk_reflection_batches")),
    )
    op.create_index(op.f("ix_reflection_batches_role_id"), "reflection_batches", ["role_id"])
    op.create_table(
        "executor_audit",
        sa.Column("audit_id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("batch_id", ID, nullable=False),
        sa.Column("role_id", ID, nullable=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("caller", sa.String(64), nullable=False),
        sa.Column("tool", sa.String(128), nullable=False),
        sa.Column("effects", sa.JSON(), nullable=True),
        sa.Column("arguments", sa.JSON(), nullable=True),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("idempotency_key", sa.String(128), nullable=True),
        sa.PrimaryKeyConstraint("audit_id", name=op.f("pk_executor_audit")),
    )
    op.create_index(op.f("ix_executor_audit_batch_id"), "executor_audit", ["batch_id"])
    op.create_table(
        "reflection_role_locks",
        sa.Column("role_id", ID, nullable=False),
        sa.Column("holder", ID, nullable=False),
        sa.Column("acquired_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("role_id", name=op.f("pk_reflection_role_locks")),
    )


def downgrade() -> None:
    op.drop_table("reflection_role_locks")
    op.drop_index(op.f("ix_executor_audit_batch_id"), table_name="executor_audit")
    op.drop_table("executor_audit")
    op.drop_index(op.f("ix_reflection_batches_role_id"), table_name="reflection_batches")
    op.drop_table("reflection_batches")
    op.drop_table("reflection_budget_usage")
    op.drop_index(op.f("ix_evaluation_promotions_decision_id"), table_name="evaluation_promotions")
    op.drop_index(op.f("ix_evaluation_promotions_batch_id"), table_name="evaluation_promotions")
    op.drop_table("evaluation_promotions")
    op.drop_index(op.f("ix_evaluation_run_lineage_role_id"), table_name="evaluation_run_lineage")
    op.drop_index(op.f("ix_evaluation_run_lineage_batch_id"), table_name="evaluation_run_lineage")
    op.drop_table("evaluation_run_lineage")
    op.drop_table("evaluation_batches")
