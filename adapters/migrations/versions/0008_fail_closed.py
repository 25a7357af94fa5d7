"""fail-closed: settlement and time reason codes, revocations, lesson review, admission lock

Revision ID: 0008_fail_closed
Revises: 0012_skill_cycle
Create Date: 2026-12-12 09:00:00

* `quarantine.reason_code` is widened to 32 characters and gains the reason codes of the
  new admission expectations (markers, time order, position, settlement) and
  `unknown_decision` (a preview consumption naming a decision the ledger does not hold).
* `role_cases.state` gains `held` (a lesson that addresses the system, waiting for
  review), `rejected` (a held lesson a reviewer refused) and `revoked` (a case a later
  admission batch took back). On SQLite the table is rebuilt, so its triggers and FTS
  rows are rebuilt too (as in revision 0005).
* `position_lifecycles.execution_id`: the execution a position belongs to (optional; a
  decision's only position belongs to all its executions).
* `admission_batches.revoked`, `reflection_batches.held` and `.skipped`: counts of the
  new outcomes.
* New tables `case_revocations`, `lesson_reviews` and `admission_locks`
  (`reflexmem.ledger.safety_models`).

Self-contained: the value lists are spelled out here, not imported, so this revision
keeps meaning what it meant when later revisions change the enumerations.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from adapters.migrations import sqlite_role_cases

revision = "0008_fail_closed"
down_revision = "0012_skill_cycle"
branch_labels = None
depends_on = None

OLD_REASONS = (
    "unknown_role",
    "automated_origin",
    "unknown_origin",
    "unverified_external",
    "preview_missing",
    "preview_unconsumed",
    "preview_reused",
    "preview_double_consume",
    "identity_mismatch",
    "bar_close_missing",
    "bar_close_invalid",
    "bar_open_invalid",
    "bar_high_invalid",
    "bar_low_invalid",
    "bar_volume_invalid",
    "bar_high_below_low",
    "bar_in_future",
    "bar_duplicate",
    "bar_not_increasing",
    "bar_close_conflict",
    "bar_fields_conflict",
)
NEW_REASONS = (
    *OLD_REASONS,
    "unknown_decision",
    "malformed_markers",
    "executed_before_decision",
    "preview_after_execution",
    "consumption_out_of_order",
    "position_ambiguous",
    "settled_before_open",
    "settlement_return_invalid",
)
OLD_STATES = ("pending", "eligible", "reflected", "reflection_failed")
NEW_STATES = (*OLD_STATES, "held", "rejected", "revoked")
REVIEW_STATES = ("held", "accepted", "rejected")
ID = sa.String(64)


def _in(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def _reasons(values: tuple[str, ...], width: int) -> None:
    with op.batch_alter_table("quarantine", schema=None) as batch:
        batch.drop_constraint(op.f("ck_quarantine_reason_code"), type_="check")
        batch.alter_column("reason_code", type_=sa.String(width), existing_nullable=False)
        batch.create_check_constraint(
            op.f("ck_quarantine_reason_code"), sa.text(_in("reason_code", values))
        )


def _case_states(values: tuple[str, ...]) -> None:
    with op.batch_alter_table("role_cases", schema=None) as batch:
        batch.drop_constraint(op.f("ck_role_cases_case_state"), type_="check")
        batch.create_check_constraint(op.f("ck_role_cases_case_state"), _in("state", values))
    if op.get_bind().dialect.name == "sqlite":
        sqlite_role_cases.create_triggers(op.execute)
        op.execute("INSERT INTO role_cases_fts(role_cases_fts) VALUES ('delete-all')")
        sqlite_role_cases.backfill(op.execute)


def upgrade() -> None:
    _reasons(NEW_REASONS, 32)
    _case_states(NEW_STATES)
    with op.batch_alter_table("position_lifecycles", schema=None) as batch:
        batch.add_column(sa.Column("execution_id", ID, nullable=True))
        batch.create_foreign_key(
            op.f("fk_position_lifecycles_execution_id_trade_executions"),
            "trade_executions",
            ["execution_id"],
            ["execution_id"],
        )
        batch.create_index(op.f("ix_position_lifecycles_execution_id"), ["execution_id"])
    with op.batch_alter_table("admission_batches", schema=None) as batch:
        batch.add_column(sa.Column("revoked", sa.Integer(), server_default="0", nullable=False))
    with op.batch_alter_table("reflection_batches", schema=None) as batch:
        batch.add_column(sa.Column("held", sa.Integer(), server_default="0", nullable=False))
        batch.add_column(sa.Column("skipped", sa.Integer(), server_default="0", nullable=False))
    op.create_table(
        "case_revocations",
        sa.Column("case_id", sa.String(80), nullable=False),
        sa.Column("execution_id", ID, nullable=False),
        sa.Column("reason_code", sa.String(32), nullable=False),
        sa.Column("failed_expectations", sa.Text(), nullable=False),
        sa.Column("previous_state", sa.String(32), nullable=False),
        sa.Column("admitted_batch_id", ID, nullable=False),
        sa.Column("revoked_by_batch_id", ID, nullable=False),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            _in("reason_code", NEW_REASONS), name=op.f("ck_case_revocations_revocation_reason")
        ),
        sa.ForeignKeyConstraint(
            ["case_id"], ["role_cases.case_id"], name=op.f("fk_case_revocations_case_id_role_cases")
        ),
        sa.PrimaryKeyConstraint("case_id", name=op.f("pk_case_revocations")),
    )
    op.create_index(op.f("ix_case_revocations_execution_id"), "case_revocations", ["execution_id"])
    op.create_index(
        op.f("ix_case_revocations_revoked_by_batch_id"), "case_revocations", ["revoked_by_batch_id"]
    )
    op.create_table(
        "lesson_reviews",
        sa.Column("case_id", sa.String(80), nullable=False),
        sa.Column("role_id", ID, nullable=False),
        sa.Column("status", sa.String(8), nullable=False),
        sa.Column("matched", sa.Text(), nullable=False),
        sa.Column("held_by_batch_id", ID, nullable=False),
        sa.Column("decided_by", sa.String(128), nullable=True),
        sa.Column("note", sa.Text(), nullable=True),
        sa.Column("held_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            _in("status", REVIEW_STATES), name=op.f("ck_lesson_reviews_lesson_review_status")
        ),
        sa.ForeignKeyConstraint(
            ["case_id"], ["role_cases.case_id"], name=op.f("fk_lesson_reviews_case_id_role_cases")
        ),
        sa.PrimaryKeyConstraint("case_id", name=op.f("pk_lesson_reviews")),
    )
    op.create_index(op.f("ix_lesson_reviews_role_id"), "lesson_reviews", ["role_id"])
    op.create_table(
        "admission_locks",
        sa.Column("name", sa.String(32), nullable=False),
        sa.Column("holder", ID, nullable=False),
        sa.Column("acquired_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_admission_locks")),
    )


def downgrade() -> None:
    op.drop_table("admission_locks")
    op.drop_index(op.f("ix_lesson_reviews_role_id"), table_name="lesson_reviews")
    op.drop_table("lesson_reviews")
    op.drop_index(op.f("ix_case_revocations_revoked_by_batch_id"), table_name="case_revocations")
    op.drop_index(op.f("ix_case_revocations_execution_id"), table_name="case_revocations")
    op.drop_table("case_revocations")
    with op.batch_alter_table("reflection_batches", schema=None) as batch:
        batch.drop_column("skipped")
        batch.drop_column("held")
    with op.batch_alter_table("admission_batches", schema=None) as batch:
        batch.drop_column("revoked")
    with op.batch_alter_table("position_lifecycles", schema=None) as batch:
        batch.drop_index(op.f("ix_position_lifecycles_execution_id"))
        batch.drop_constraint(
            op.f("fk_position_lifecycles_execution_id_trade_executions"), type_="foreignkey"
        )
        batch.drop_column("execution_id")
    op.execute(
        "UPDATE role_cases SET state = 'reflection_failed' "
        "WHERE state IN ('held', 'rejected', 'revoked')"
    )
    _case_states(OLD_STATES)
    op.execute(f"DELETE FROM quarantine WHERE NOT ({_in('reason_code', OLD_REASONS)})")
    _reasons(OLD_REASONS, 22)
