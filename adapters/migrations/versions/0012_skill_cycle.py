"""skill cycle: sources of generated skill versions, and every check the cycle made

Revision ID: 0012_skill_cycle
Revises: 0010_lineage
Create Date: 2026-12-04 09:00:00

Tables of `reflexmem.ledger.skill_cycle_models`: `skill_sources` (the episodes, cases
and decisions a generated skill version was learned from, indexed so a trade finds the
versions it taught) and `skill_checks` (every evaluation of a version, moving or not,
and the windows of the pre-decision checks). Self-contained: it only creates its own
tables (their foreign keys point at `skill_versions` of 0006).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012_skill_cycle"
down_revision = "0010_lineage"
branch_labels = None
depends_on = None

ID = sa.String(64)
TS = sa.DateTime(timezone=True)
KINDS = ("gate", "evaluation", "replay", "shadow", "audit", "revalidation")


def upgrade() -> None:
    op.create_table(
        "skill_sources",
        sa.Column("skill_id", ID, nullable=False),
        sa.Column("version", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("episode_id", ID, nullable=False),
        sa.Column("case_id", sa.String(80), nullable=True),
        sa.Column("decision_id", ID, nullable=True),
        sa.Column("pattern", sa.String(64), nullable=True),
        sa.ForeignKeyConstraint(
            ["skill_id", "version"],
            ["skill_versions.skill_id", "skill_versions.version"],
            name="fk_skill_sources_version_skill_versions",
        ),
        sa.PrimaryKeyConstraint("skill_id", "version", "episode_id", name="pk_skill_sources"),
    )
    op.create_index("ix_skill_sources_episode_id", "skill_sources", ["episode_id"])
    op.create_index("ix_skill_sources_case_id", "skill_sources", ["case_id"])
    op.create_index("ix_skill_sources_decision_id", "skill_sources", ["decision_id"])

    op.create_table(
        "skill_checks",
        sa.Column("check_id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column(
            "kind",
            sa.Enum(*KINDS, name="check_kind", native_enum=False, create_constraint=True),
            nullable=False,
        ),
        sa.Column("task_family", ID, nullable=False),
        sa.Column("skill_id", ID, nullable=True),
        sa.Column("version", sa.Integer(), nullable=True),
        sa.Column("window_after", TS, nullable=True),
        sa.Column("window_through", TS, nullable=True),
        sa.Column("passed", sa.Boolean(), nullable=True),
        sa.Column("moved_to", sa.String(16), nullable=True),
        sa.Column("metrics", sa.JSON(), nullable=True),
        sa.Column("detail", sa.JSON(), nullable=True),
        sa.Column("mlflow_run_id", sa.String(64), nullable=True),
        sa.Column("at", TS, nullable=False),
        sa.PrimaryKeyConstraint("check_id", name="pk_skill_checks"),
    )
    op.create_index("ix_skill_checks_version", "skill_checks", ["skill_id", "version"])
    op.create_index("ix_skill_checks_kind_family", "skill_checks", ["kind", "task_family"])


def downgrade() -> None:
    op.drop_index("ix_skill_checks_kind_family", table_name="skill_checks")
    op.drop_index("ix_skill_checks_version", table_name="skill_checks")
    op.drop_table("skill_checks")
    op.drop_index("ix_skill_sources_decision_id", table_name="skill_sources")
    op.drop_index("ix_skill_sources_case_id", table_name="skill_sources")
    op.drop_index("ix_skill_sources_episode_id", table_name="skill_sources")
    op.drop_table("skill_sources")
