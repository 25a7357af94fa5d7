"""the trading stream feeds memory: episodes linked to cases, versioned patterns, recall log

Revision ID: 0005
Revises: 0004b_schedule
Create Date: 2026-12-03 14:00:00

* `episodes` gains `namespace`, `episode_index` (unique together), `case_id` (the role
  case an episode records, unique) and `quality`, so every reflected case is one
  episode of its role's namespace and the schedule can read a window by index.
* `memory_entries` gains `wins`, `losses` and `first_episode` (the counts and the first
  episode a merged pattern extends from window to window) and
  `superseded_at`; state `superseded` marks an active version replaced by a newer one,
  so a recall "as of T" can still see the version that was current at T.
* `role_cases.pending_reason` gains `no_market_data` (no bars for the symbol or period).
* `recall_log`: which retrieval policy served which decision's recall, so the bandit is
  credited when that decision's case is recorded.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from adapters.migrations import sqlite_role_cases

revision = "0005"
down_revision = "0004b_schedule"
branch_labels = None
depends_on = None

OLD_REASONS = ("unsettled", "insufficient_data", "not_due", "budget_deferred")
NEW_REASONS = (*OLD_REASONS, "no_market_data")
OLD_STATES = ("active", "candidate", "retired")
NEW_STATES = (*OLD_STATES, "superseded")


def _in(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def _role_case_reasons(values: tuple[str, ...]) -> None:
    """Replace the pending-reason CHECK; on SQLite the table is rebuilt, so its triggers
    and its FTS rows (keyed by rowid, which the copy may renumber) are rebuilt too."""
    with op.batch_alter_table("role_cases", schema=None) as batch:
        batch.drop_constraint(op.f("ck_role_cases_pending_reason"), type_="check")
        batch.create_check_constraint("pending_reason", _in("pending_reason", values))
    if op.get_bind().dialect.name == "sqlite":
        sqlite_role_cases.create_triggers(op.execute)
        op.execute("INSERT INTO role_cases_fts(role_cases_fts) VALUES ('delete-all')")
        sqlite_role_cases.backfill(op.execute)


def upgrade() -> None:
    with op.batch_alter_table("episodes", schema=None) as batch:
        batch.add_column(sa.Column("namespace", sa.String(128), nullable=True))
        batch.add_column(sa.Column("episode_index", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("case_id", sa.String(80), nullable=True))
        batch.add_column(sa.Column("quality", sa.Double(), nullable=True))
        batch.create_foreign_key(
            "fk_episodes_case_id_role_cases", "role_cases", ["case_id"], ["case_id"]
        )
        batch.create_unique_constraint("uq_episodes_case_id", ["case_id"])
        batch.create_unique_constraint("uq_episodes_namespace", ["namespace", "episode_index"])
        batch.create_index("ix_episodes_decision_id", ["decision_id"], unique=False)

    with op.batch_alter_table("memory_entries", schema=None) as batch:
        batch.add_column(sa.Column("wins", sa.Integer(), server_default="0", nullable=False))
        batch.add_column(sa.Column("losses", sa.Integer(), server_default="0", nullable=False))
        batch.add_column(sa.Column("first_episode", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("superseded_at", sa.DateTime(timezone=True), nullable=True))
        batch.drop_constraint(op.f("ck_memory_entries_memory_state"), type_="check")
        batch.alter_column("state", type_=sa.String(10), existing_nullable=False)
        batch.create_check_constraint("memory_state", _in("state", NEW_STATES))

    _role_case_reasons(NEW_REASONS)

    op.create_table(
        "recall_log",
        sa.Column("recall_id", sa.String(64), nullable=False),
        sa.Column("namespace", sa.String(128), nullable=False),
        sa.Column("decision_id", sa.String(64), nullable=True),
        sa.Column("policy", sa.String(128), nullable=False),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("hits", sa.JSON(), nullable=False),
        sa.Column("as_of", sa.DateTime(timezone=True), nullable=True),
        sa.Column("recalled_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("recall_id", name="pk_recall_log"),
    )
    op.create_index("ix_recall_log_decision_id", "recall_log", ["decision_id"])


def downgrade() -> None:
    op.drop_index("ix_recall_log_decision_id", table_name="recall_log")
    op.drop_table("recall_log")
    _role_case_reasons(OLD_REASONS)
    with op.batch_alter_table("memory_entries", schema=None) as batch:
        batch.drop_constraint(op.f("ck_memory_entries_memory_state"), type_="check")
        batch.create_check_constraint("memory_state", _in("state", OLD_STATES))
        batch.alter_column("state", type_=sa.String(9), existing_nullable=False)
        batch.drop_column("superseded_at")
        batch.drop_column("first_episode")
        batch.drop_column("losses")
        batch.drop_column("wins")
    with op.batch_alter_table("episodes", schema=None) as batch:
        batch.drop_index("ix_episodes_decision_id")
        batch.drop_constraint("uq_episodes_namespace", type_="unique")
        batch.drop_constraint("uq_episodes_case_id", type_="unique")
        batch.drop_constraint("fk_episodes_case_id_role_cases", type_="foreignkey")
        batch.drop_column("quality")
        batch.drop_column("case_id")
        batch.drop_column("episode_index")
        batch.drop_column("namespace")
