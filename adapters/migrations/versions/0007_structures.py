"""structure versions, lineage, searches, archive, bundles, active bundle, episodes, events

Revision ID: 0007_structures
Revises: 0006_reflex_skills
Create Date: 2026-12-03 12:40:00

Tables of `reflexmem.ledger.structure_models`: every registered structure version with
its YAML, parent and operator steps (and its MLflow registered model version), the
lineage graph, one row per selection-loop run with its floors, controls and final test,
the non-dominated archive of each run, bundles (a structure version pinned with skill
and knowledge-index versions), the active-bundle pointer per scope, episodes recorded
under a bundle for replay, and the events (refusals, drift, quarantine, rollback).
Self-contained: it only creates its own tables.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007_structures"
down_revision = "0006_reflex_skills"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "structure_events",
        sa.Column("event_id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("kind", sa.String(length=24), nullable=False),
        sa.Column("structure_id", sa.String(length=128), nullable=True),
        sa.Column("bundle_id", sa.String(length=64), nullable=True),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("field", sa.Text(), nullable=False),
        sa.Column("check_name", sa.String(length=64), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("detail", sa.JSON(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "kind IN ('refused_file', 'refused_mutation', 'refused_message', 'refused_scope', 'registered', 'activated', 'drift', 'quarantined', 'rolled_back')",
            name=op.f("ck_structure_events_event_kind"),
        ),
        sa.PrimaryKeyConstraint("event_id", name=op.f("pk_structure_events")),
    )
    op.create_index(op.f("ix_structure_events_kind"), "structure_events", ["kind"])
    op.create_index(op.f("ix_structure_events_structure_id"), "structure_events", ["structure_id"])

    op.create_table(
        "structure_versions",
        sa.Column("structure_id", sa.String(length=128), nullable=False),
        sa.Column("parent_id", sa.String(length=128), nullable=True),
        sa.Column("lifecycle", sa.String(length=16), nullable=False),
        sa.Column("yaml", sa.Text(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("operator", sa.String(length=255), nullable=False),
        sa.Column("steps", sa.JSON(), nullable=True),
        sa.Column("search_id", sa.String(length=64), nullable=True),
        sa.Column("mlflow_model", sa.String(length=128), nullable=True),
        sa.Column("mlflow_version", sa.String(length=16), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "lifecycle IN ('candidate', 'validating', 'limited', 'active', 'quarantined', 'retired')",
            name=op.f("ck_structure_versions_lifecycle"),
        ),
        sa.ForeignKeyConstraint(
            ["parent_id"],
            ["structure_versions.structure_id"],
            name=op.f("fk_structure_versions_parent_id_structure_versions"),
        ),
        sa.PrimaryKeyConstraint("structure_id", name=op.f("pk_structure_versions")),
    )
    op.create_index(
        op.f("ix_structure_versions_fingerprint"), "structure_versions", ["fingerprint"]
    )

    op.create_table(
        "structure_bundles",
        sa.Column("bundle_id", sa.String(length=64), nullable=False),
        sa.Column("scope", sa.String(length=64), nullable=False),
        sa.Column("structure_id", sa.String(length=128), nullable=False),
        sa.Column("skill_versions", sa.JSON(), nullable=False),
        sa.Column("index_version", sa.String(length=128), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("previous_bundle_id", sa.String(length=64), nullable=True),
        sa.Column("baseline", sa.JSON(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("activated_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("quarantined_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "state IN ('validating', 'active', 'superseded', 'quarantined')",
            name=op.f("ck_structure_bundles_bundle_state"),
        ),
        sa.ForeignKeyConstraint(
            ["structure_id"],
            ["structure_versions.structure_id"],
            name=op.f("fk_structure_bundles_structure_id_structure_versions"),
        ),
        sa.PrimaryKeyConstraint("bundle_id", name=op.f("pk_structure_bundles")),
    )
    op.create_index(op.f("ix_structure_bundles_scope"), "structure_bundles", ["scope"])

    op.create_table(
        "structure_lineage",
        sa.Column("child_id", sa.String(length=128), nullable=False),
        sa.Column("parent_id", sa.String(length=128), nullable=False),
        sa.Column("operator", sa.String(length=255), nullable=False),
        sa.Column("steps", sa.JSON(), nullable=True),
        sa.ForeignKeyConstraint(
            ["child_id"],
            ["structure_versions.structure_id"],
            name=op.f("fk_structure_lineage_child_id_structure_versions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("child_id", "parent_id", name=op.f("pk_structure_lineage")),
    )
    op.create_table(
        "structure_searches",
        sa.Column("search_id", sa.String(length=64), nullable=False),
        sa.Column("parent_id", sa.String(length=128), nullable=False),
        sa.Column("environment", sa.String(length=64), nullable=False),
        sa.Column("cost_model", sa.String(length=32), nullable=False),
        sa.Column("winner_fingerprint", sa.String(length=64), nullable=False),
        sa.Column("winner_id", sa.String(length=128), nullable=True),
        sa.Column("registered", sa.Boolean(), nullable=False),
        sa.Column("generations", sa.Integer(), nullable=False),
        sa.Column("generated", sa.Integer(), nullable=False),
        sa.Column("refused", sa.Integer(), nullable=False),
        sa.Column("evaluated", sa.Integer(), nullable=False),
        sa.Column("wall_s", sa.Double(), nullable=False),
        sa.Column("floors", sa.JSON(), nullable=False),
        sa.Column("frozen_parent", sa.JSON(), nullable=False),
        sa.Column("stats", sa.JSON(), nullable=False),
        sa.Column("history", sa.JSON(), nullable=False),
        sa.Column("controls", sa.JSON(), nullable=True),
        sa.Column("final_test", sa.JSON(), nullable=True),
        sa.Column("mlflow_run_id", sa.String(length=64), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["parent_id"],
            ["structure_versions.structure_id"],
            name=op.f("fk_structure_searches_parent_id_structure_versions"),
        ),
        sa.PrimaryKeyConstraint("search_id", name=op.f("pk_structure_searches")),
    )
    op.create_table(
        "structure_active_bundles",
        sa.Column("scope", sa.String(length=64), nullable=False),
        sa.Column("bundle_id", sa.String(length=64), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["bundle_id"],
            ["structure_bundles.bundle_id"],
            name=op.f("fk_structure_active_bundles_bundle_id_structure_bundles"),
        ),
        sa.PrimaryKeyConstraint("scope", name=op.f("pk_structure_active_bundles")),
    )
    op.create_table(
        "structure_archive",
        sa.Column("search_id", sa.String(length=64), nullable=False),
        sa.Column("candidate_id", sa.String(length=128), nullable=False),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("yaml", sa.Text(), nullable=False),
        sa.Column("success", sa.JSON(), nullable=False),
        sa.Column("cost", sa.Double(), nullable=False),
        sa.Column("passes_floor", sa.Boolean(), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("parent_candidate", sa.String(length=128), nullable=True),
        sa.Column("lineage", sa.JSON(), nullable=True),
        sa.ForeignKeyConstraint(
            ["search_id"],
            ["structure_searches.search_id"],
            name=op.f("fk_structure_archive_search_id_structure_searches"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("search_id", "candidate_id", name=op.f("pk_structure_archive")),
    )
    op.create_table(
        "structure_episodes",
        sa.Column("episode_id", sa.String(length=64), nullable=False),
        sa.Column("bundle_id", sa.String(length=64), nullable=False),
        sa.Column("structure_id", sa.String(length=128), nullable=False),
        sa.Column("task_id", sa.String(length=128), nullable=False),
        sa.Column("family", sa.String(length=64), nullable=False),
        sa.Column("task", sa.JSON(), nullable=False),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.Column("success", sa.Boolean(), nullable=False),
        sa.Column("signature", sa.Text(), nullable=False),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["bundle_id"],
            ["structure_bundles.bundle_id"],
            name=op.f("fk_structure_episodes_bundle_id_structure_bundles"),
        ),
        sa.PrimaryKeyConstraint("episode_id", name=op.f("pk_structure_episodes")),
    )
    op.create_index(op.f("ix_structure_episodes_bundle_id"), "structure_episodes", ["bundle_id"])


def downgrade() -> None:
    op.drop_table("structure_episodes")
    op.drop_table("structure_archive")
    op.drop_table("structure_active_bundles")
    op.drop_table("structure_searches")
    op.drop_table("structure_lineage")
    op.drop_table("structure_bundles")
    op.drop_table("structure_versions")
    op.drop_table("structure_events")
