"""drop the GIN index on role_cases.search: no recall plan uses it

Revision ID: 0018_drop_search_gin
Revises: 0017_entry_stats
Create Date: 2026-12-06 03:45:00

PostgreSQL only. Recall always constrains a role (and usually a symbol and a state),
and the planner answers both shapes on the B-tree `ix_role_cases_recall`, filtering by
`search @@ query` on the slice: at 1e5 cases, 60 role-only text queries took p50 19.5 /
p99 27.1 ms with the index and 19.4 / 27.7 ms without it, role + symbol queries 1.5 /
1.9 ms and 1.2 / 1.7 ms, and no plan used it (docs/recall.md). Every insert of a role
case still paid to maintain it. The stored `search` column stays: `ts_rank_cd` ranks
the slice with it.
"""

from __future__ import annotations

from alembic import op

revision = "0018_drop_search_gin"
down_revision = "0017_entry_stats"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP INDEX IF EXISTS ix_role_cases_search")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "CREATE INDEX IF NOT EXISTS ix_role_cases_search ON role_cases USING gin (search)"
        )
