"""legacy migration: legacy_cases, legacy_migrations, the `legacy_unknown_role` reason

Revision ID: 0015_legacy
Revises: 0008_fail_closed
Create Date: 2026-12-03 16:30:00

* `quarantine.reason_code` (and `case_revocations.reason_code`, which shares the
  vocabulary) gains `legacy_unknown_role`; `quarantine.subject_kind` gains `legacy_row`.
  Only the quarantine and case_revocations tables are rebuilt on SQLite, never
  `role_cases`, so no trigger or FTS row needs rebuilding.
* New tables `legacy_cases` and `legacy_migrations` (`reflexmem.ledger.legacy_models`).

Self-contained: the value lists are spelled out here, not imported.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015_legacy"
down_revision = "0014_ops"
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
    "unknown_decision",
    "malformed_markers",
    "executed_before_decision",
    "preview_after_execution",
    "consumption_out_of_order",
    "position_ambiguous",
    "settled_before_open",
    "settlement_return_invalid",
)
NEW_REASONS = (*OLD_REASONS, "legacy_unknown_role")
OLD_KINDS = ("execution", "preview_consumption", "bar")
NEW_KINDS = (*OLD_KINDS, "legacy_row")
ID = sa.String(64)


def _in(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def _checks(reasons: tuple[str, ...], kinds: tuple[str, ...]) -> None:
    with op.batch_alter_table("quarantine", schema=None) as batch:
        batch.drop_constraint(op.f("ck_quarantine_reason_code"), type_="check")
        batch.drop_constraint(op.f("ck_quarantine_subject_kind"), type_="check")
        batch.create_check_constraint(
            op.f("ck_quarantine_reason_code"), sa.text(_in("reason_code", reasons))
        )
        batch.create_check_constraint(
            op.f("ck_quarantine_subject_kind"), sa.text(_in("subject_kind", kinds))
        )
    with op.batch_alter_table("case_revocations", schema=None) as batch:
        batch.drop_constraint(op.f("ck_case_revocations_revocation_reason"), type_="check")
        batch.create_check_constraint(
            op.f("ck_case_revocations_revocation_reason"), sa.text(_in("reason_code", reasons))
        )


def upgrade() -> None:
    _checks(NEW_REASONS, NEW_KINDS)
    op.create_table(
        "legacy_migrations",
        sa.Column("migration_id", ID, nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("rows_in", sa.Integer(), nullable=False),
        sa.Column("moved", sa.Integer(), nullable=False),
        sa.Column("quarantined", sa.Integer(), nullable=False),
        sa.Column("unchanged", sa.Integer(), nullable=False),
        sa.Column("report", sa.JSON(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "rows_in = moved + quarantined + unchanged",
            name=op.f("ck_legacy_migrations_retention"),
        ),
        sa.PrimaryKeyConstraint("migration_id", name=op.f("pk_legacy_migrations")),
    )
    op.create_table(
        "legacy_cases",
        sa.Column("legacy_id", ID, nullable=False),
        sa.Column("role_id", ID, nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("provenance", sa.Text(), nullable=True),
        sa.Column("legacy_score", sa.Float(), nullable=True),
        sa.Column("legacy_created_at", sa.String(64), nullable=True),
        sa.Column("legacy_decision_id", ID, nullable=True),
        sa.Column("decision_id", ID, nullable=True),
        sa.Column("row_sha256", sa.String(64), nullable=False),
        sa.Column("migration_id", ID, nullable=False),
        sa.Column("migrated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["decision_id"],
            ["trading_decisions.decision_id"],
            name=op.f("fk_legacy_cases_decision_id_trading_decisions"),
        ),
        sa.PrimaryKeyConstraint("legacy_id", name=op.f("pk_legacy_cases")),
    )
    op.create_index(op.f("ix_legacy_cases_role_id"), "legacy_cases", ["role_id"])
    op.create_index(op.f("ix_legacy_cases_decision_id"), "legacy_cases", ["decision_id"])
    op.create_index(op.f("ix_legacy_cases_migration_id"), "legacy_cases", ["migration_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_legacy_cases_migration_id"), table_name="legacy_cases")
    op.drop_index(op.f("ix_legacy_cases_decision_id"), table_name="legacy_cases")
    op.drop_index(op.f("ix_legacy_cases_role_id"), table_name="legacy_cases")
    op.drop_table("legacy_cases")
    op.drop_table("legacy_migrations")
    op.execute("DELETE FROM quarantine WHERE subject_kind = 'legacy_row'")
    _checks(OLD_REASONS, OLD_KINDS)
