"""valid time: role_cases.matured_at, memory_entries.superseded_episode

Revision ID: 0019_valid_time
Revises: 0018_drop_search_gin
Create Date: 2026-12-06 04:45:00

Recall "as of T" asked whether a lesson had been *written* by T (the reflection's
wall-clock stamp), so a store back-filled from past years recalled nothing at its own
clocks. `matured_at` is the cycle clock from which a case is mature: the later of its
decision time plus its role's maturation period and its position's settlement. The
maturity check stamps it; recall filters on it.

A memory entry's valid time is the namespace's episode clock: it was made at
`created_episode`, and `superseded_episode` is the clock at which a newer version
replaced it (recall maps T to the episode clock of the episodes valid by T).

Existing rows: a superseded entry gets the newest `created_episode` of its namespace
among the entries written in the same flush (created at its `superseded_at`), else the
namespace's clock. A reflected case gets its reflection's recorded time (it becomes
recallable no earlier than before the upgrade); other cases stay null until the next
maturity check stamps them. Recall treats a null stamp as the recorded reflection time.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019_valid_time"
down_revision = "0018_drop_search_gin"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain ALTER TABLE on both backends: a batch copy would drop role_cases' triggers
    # on SQLite (the reflection stamp and the full-text index).
    op.add_column("role_cases", sa.Column("matured_at", sa.DateTime(timezone=True)))
    op.add_column("memory_entries", sa.Column("superseded_episode", sa.Integer()))
    op.execute(
        "UPDATE memory_entries SET superseded_episode = COALESCE("
        "(SELECT MAX(n.created_episode) FROM memory_entries n "
        "WHERE n.namespace = memory_entries.namespace AND n.created_at = memory_entries.superseded_at), "
        "(SELECT ns.clock FROM memory_namespaces ns WHERE ns.namespace = memory_entries.namespace)) "
        "WHERE state = 'superseded'"
    )
    op.execute(
        "UPDATE role_cases SET matured_at = (SELECT cr.reflected_at FROM case_reflections cr "
        "WHERE cr.case_id = role_cases.case_id) WHERE state = 'reflected'"
    )


def downgrade() -> None:
    op.drop_column("role_cases", "matured_at")
    op.drop_column("memory_entries", "superseded_episode")  # SQLite >= 3.35 drops a column in place
