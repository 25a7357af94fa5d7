"""memory tiers, policies, bandit posteriors, recall indexes

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-02 17:10:00

Recall indexes per backend:

* SQLite: a contentless FTS5 table `role_cases_fts` (rowid = role_cases.rowid) over
  decision_text, lesson, symbol, scenario, plus a `facets` column of hex tokens naming
  (role, state[, symbol][, scenario]) so that a constrained full-text query intersects
  posting lists instead of scanning every case that mentions a common word. Triggers
  keep it in step. The facets only accelerate; recall still applies every constraint as
  a SQL filter on role_cases. After a VACUUM (which may renumber rowids) run
  `reflexmem.recall.fts.rebuild_sqlite_fts`.
* PostgreSQL: a stored generated `search tsvector` column with a GIN index, and the
  pgvector extension + `case_embeddings.vec` only if the extension can be created.
* Both: composite B-tree indexes for the recall filters, and a trigger that stamps
  case_reflections.reflected_at when a case becomes `reflected` (point-in-time recall).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from adapters.migrations import sqlite_role_cases

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

TIERS = ("episodic", "semantic", "procedural")
STATES = ("active", "candidate", "retired")


def _enum(values: tuple[str, ...], name: str) -> sa.Enum:
    return sa.Enum(
        *values,
        name=name,
        native_enum=False,
        create_constraint=True,
        length=max(len(v) for v in values),
    )


def _sqlite_upgrade() -> None:
    sqlite_role_cases.create_fts_table(op.execute)
    sqlite_role_cases.create_triggers(op.execute)
    sqlite_role_cases.backfill(op.execute)


def _postgres_upgrade() -> None:
    op.execute(
        "ALTER TABLE role_cases ADD COLUMN search tsvector GENERATED ALWAYS AS ("
        "setweight(to_tsvector('english'::regconfig, coalesce(lesson, '')), 'A') || "
        "setweight(to_tsvector('english'::regconfig, coalesce(decision_text, '')), 'B') || "
        "setweight(to_tsvector('simple'::regconfig, "
        "coalesce(symbol, '') || ' ' || coalesce(scenario, '')), 'C')) STORED"
    )
    op.execute("CREATE INDEX ix_role_cases_search ON role_cases USING gin (search)")
    op.execute(
        "CREATE FUNCTION reflexmem_stamp_reflection() RETURNS trigger LANGUAGE plpgsql AS $$ "
        "BEGIN "
        "IF NEW.state = 'reflected' AND (TG_OP = 'INSERT' OR OLD.state IS DISTINCT FROM "
        "'reflected') THEN "
        "INSERT INTO case_reflections(case_id, reflected_at) "
        "VALUES (NEW.case_id, clock_timestamp()) "
        "ON CONFLICT (case_id) DO UPDATE SET reflected_at = EXCLUDED.reflected_at; "
        "END IF; RETURN NEW; END $$"
    )
    op.execute(
        "CREATE TRIGGER role_cases_reflected AFTER INSERT OR UPDATE OF state ON role_cases "
        "FOR EACH ROW EXECUTE FUNCTION reflexmem_stamp_reflection()"
    )
    bind = op.get_bind()
    savepoint = bind.begin_nested()
    try:
        bind.execute(sa.text("CREATE EXTENSION IF NOT EXISTS vector"))
        bind.execute(sa.text("ALTER TABLE case_embeddings ADD COLUMN vec vector"))
    except sa.exc.DBAPIError:
        savepoint.rollback()  # no pgvector on this server: the numpy backend is used
    else:
        savepoint.commit()


def upgrade() -> None:
    op.create_table(
        "memory_namespaces",
        sa.Column("namespace", sa.String(128), nullable=False),
        sa.Column("next_episode", sa.Integer(), server_default="0", nullable=False),
        sa.Column("clock", sa.Integer(), server_default="0", nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("namespace", name=op.f("pk_memory_namespaces")),
    )
    op.create_table(
        "memory_entries",
        sa.Column("entry_id", sa.String(255), nullable=False),
        sa.Column("namespace", sa.String(128), nullable=False),
        sa.Column("tier", _enum(TIERS, "memory_tier"), nullable=False),
        sa.Column("state", _enum(STATES, "memory_state"), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("tags", sa.JSON(), nullable=False),
        sa.Column("quality", sa.Double(), nullable=False),
        sa.Column("created_episode", sa.Integer(), nullable=False),
        sa.Column("source_ids", sa.JSON(), nullable=False),
        sa.Column("source_kind", sa.String(16), nullable=True),
        sa.Column("support", sa.Integer(), nullable=False),
        sa.Column("confidence", sa.Double(), nullable=False),
        sa.Column("window_key", sa.String(255), nullable=True),
        sa.Column("outcome", sa.Double(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "quality >= 0 AND quality <= 1", name=op.f("ck_memory_entries_quality_unit")
        ),
        sa.PrimaryKeyConstraint("entry_id", name=op.f("pk_memory_entries")),
    )
    op.create_index(
        "ix_memory_entries_ns_tier_state", "memory_entries", ["namespace", "tier", "state"]
    )
    op.create_table(
        "memory_sources",
        sa.Column("entry_id", sa.String(255), nullable=False),
        sa.Column("source_id", sa.String(255), nullable=False),
        sa.ForeignKeyConstraint(
            ["entry_id"],
            ["memory_entries.entry_id"],
            name=op.f("fk_memory_sources_entry_id_memory_entries"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("entry_id", "source_id", name=op.f("pk_memory_sources")),
    )
    op.create_index(op.f("ix_memory_sources_source_id"), "memory_sources", ["source_id"])
    op.create_table(
        "memory_windows",
        sa.Column("namespace", sa.String(128), nullable=False),
        sa.Column("window_key", sa.String(255), nullable=False),
        sa.Column("processed_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("namespace", "window_key", name=op.f("pk_memory_windows")),
    )
    op.create_table(
        "retrieval_policies",
        sa.Column("agent_id", sa.String(128), nullable=False),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("parent", sa.String(128), nullable=True),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("agent_id", "name", name=op.f("pk_retrieval_policies")),
    )
    op.create_table(
        "bandit_states",
        sa.Column("agent_id", sa.String(128), nullable=False),
        sa.Column("policy", sa.String(128), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("alpha", sa.Double(), nullable=False),
        sa.Column("beta", sa.Double(), nullable=False),
        sa.Column("pulls", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("alpha > 0 AND beta > 0", name=op.f("ck_bandit_states_positive")),
        sa.PrimaryKeyConstraint("agent_id", "policy", name=op.f("pk_bandit_states")),
    )
    op.create_table(
        "case_reflections",
        sa.Column("case_id", sa.String(80), nullable=False),
        sa.Column("reflected_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["case_id"],
            ["role_cases.case_id"],
            name=op.f("fk_case_reflections_case_id_role_cases"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("case_id", name=op.f("pk_case_reflections")),
    )
    op.create_table(
        "case_embeddings",
        sa.Column("case_id", sa.String(80), nullable=False),
        sa.Column("model", sa.String(64), nullable=False),
        sa.Column("dim", sa.Integer(), nullable=False),
        sa.Column("vector", sa.LargeBinary(), nullable=True),
        sa.ForeignKeyConstraint(
            ["case_id"],
            ["role_cases.case_id"],
            name=op.f("fk_case_embeddings_case_id_role_cases"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("case_id", "model", name=op.f("pk_case_embeddings")),
    )
    op.create_index(
        "ix_role_cases_recall",
        "role_cases",
        ["role_id", "state", "symbol", "scenario", "decided_at"],
    )
    op.create_index(
        "ix_role_cases_recall_scenario",
        "role_cases",
        ["role_id", "state", "scenario", "decided_at"],
    )
    if op.get_bind().dialect.name == "postgresql":
        _postgres_upgrade()
    else:
        _sqlite_upgrade()


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS role_cases_reflected ON role_cases")
        op.execute("DROP FUNCTION IF EXISTS reflexmem_stamp_reflection()")
        op.execute("DROP INDEX IF EXISTS ix_role_cases_search")
        op.execute("ALTER TABLE role_cases DROP COLUMN IF EXISTS search")
    else:
        for trigger in sqlite_role_cases.TRIGGERS:
            op.execute(f"DROP TRIGGER IF EXISTS {trigger}")
        op.execute("DROP TABLE IF EXISTS role_cases_fts")
    op.drop_index("ix_role_cases_recall_scenario", table_name="role_cases")
    op.drop_index("ix_role_cases_recall", table_name="role_cases")
    for table in (
        "case_embeddings",
        "case_reflections",
        "bandit_states",
        "retrieval_policies",
        "memory_windows",
        "memory_sources",
        "memory_entries",
        "memory_namespaces",
    ):
        op.drop_table(table)
