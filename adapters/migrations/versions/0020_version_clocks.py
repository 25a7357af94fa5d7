"""version clocks: skill_versions.recorded_at, structure_versions.valid_at

Revision ID: 0020_version_clocks
Revises: 0019_valid_time
Create Date: 2026-12-06 06:00:00

Lineage and audit ask every step for its valid time (the cycle clock at which its facts
were known) and its recorded time (the wall clock at which the row was written).

A skill version's `created_at` already is the cycle's clock: the skill cycle registers
a version with the clock it runs at (the `as_of` asked for, else the newest bar), so it
is the version's valid time; what it lacked was the wall-clock write, now `recorded_at`.
A structure version's `created_at` is the wall clock of its write (its recorded time);
what it lacked was the cycle clock, now `valid_at` (the newest bar when the structure
stage wrote it).

Existing rows get their one known time in the missing column: a skill version is
recorded at its `created_at`, a structure version valid from its `created_at`. Readers
fall back the same way for a null (a path that wrote no stamp).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020_version_clocks"
down_revision = "0019_valid_time"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("skill_versions", sa.Column("recorded_at", sa.DateTime(timezone=True)))
    op.add_column("structure_versions", sa.Column("valid_at", sa.DateTime(timezone=True)))
    op.execute("UPDATE skill_versions SET recorded_at = created_at")
    op.execute("UPDATE structure_versions SET valid_at = created_at")


def downgrade() -> None:
    # SQLite >= 3.35 drops a column in place
    op.drop_column("skill_versions", "recorded_at")
    op.drop_column("structure_versions", "valid_at")
