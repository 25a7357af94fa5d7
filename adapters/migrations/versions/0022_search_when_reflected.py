"""role cases are text-indexed once reflected: PostgreSQL's search vector, SQLite's FTS5 rows

Revision ID: 0022_search_when_reflected
Revises: 0021_distill_runs
Create Date: 2026-12-06 08:10:00

Recall only ever reads reflected cases, yet both backends indexed every case at
admission, and reflection rewrites the row (state and lesson), which indexes it again.
PostgreSQL: the stored text-search vector (`search`, ranked by `ts_rank_cd` in recall)
stemmed every decision text at admission (1.86 -> 1.60 s for the case insert at 1e5;
more for long decision texts). The column is now NULL until the case is reflected and
computed when its state becomes `reflected`; recall's results do not change (it filters
on that state). PostgreSQL 15 cannot change a generated column's expression in place, so
the column is dropped and added again (existing reflected rows are computed once here).
SQLite: the FTS5 triggers tokenised every decision text at admission (the case insert
at 1e5: 1.38 -> 0.77 s); they now index a case when it becomes reflected and unindex
it when it stops being so, and the table is rebuilt with the reflected cases.
"""

from __future__ import annotations

from alembic import op

from adapters.migrations import sqlite_role_cases

revision = "0022_search_when_reflected"
down_revision = "0021_distill_runs"
branch_labels = None
depends_on = None

_VECTOR = (
    "setweight(to_tsvector('english'::regconfig, coalesce(lesson, '')), 'A') || "
    "setweight(to_tsvector('english'::regconfig, coalesce(decision_text, '')), 'B') || "
    "setweight(to_tsvector('simple'::regconfig, "
    "coalesce(symbol, '') || ' ' || coalesce(scenario, '')), 'C')"
)


def _search(expression: str) -> None:
    op.execute("ALTER TABLE role_cases DROP COLUMN search")
    op.execute(
        f"ALTER TABLE role_cases ADD COLUMN search tsvector GENERATED ALWAYS AS ({expression}) "
        "STORED"
    )


def _fts(only_reflected: bool) -> None:
    for trigger in sqlite_role_cases.TRIGGERS:
        op.execute(f"DROP TRIGGER IF EXISTS {trigger}")
    sqlite_role_cases.create_triggers(op.execute, only_reflected=only_reflected)
    op.execute("INSERT INTO role_cases_fts(role_cases_fts) VALUES ('delete-all')")
    sqlite_role_cases.backfill(op.execute, only_reflected=only_reflected)


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        _search(f"CASE WHEN state = 'reflected' THEN {_VECTOR} END")
    else:
        _fts(only_reflected=True)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        _search(_VECTOR)
    else:
        _fts(only_reflected=False)
