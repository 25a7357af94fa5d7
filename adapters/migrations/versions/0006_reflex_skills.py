"""REFLEX skills: the experience contract on episodes, skill versions, review queue, tool calls

Revision ID: 0006_reflex_skills
Revises: 0005
Create Date: 2026-12-03 12:00:00

Tables of `reflexmem.ledger.reflex_models` (skills, skill_versions, skill_transitions,
review_queue, tool_calls, rate_buckets) and the experience contract's columns and
checks on `episodes` (`reflexmem.ledger.experience_models`). Self-contained: it only
touches tables of 0001 (`episodes`) and its own.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006_reflex_skills"
down_revision = "0005"
branch_labels = None
depends_on = None

ID = sa.String(64)
TS = sa.DateTime(timezone=True)
LAYERS = ("L0", "L1", "L2", "L3")
STATES = ("candidate", "validating", "limited", "active", "quarantined", "rejected", "retired")


def _enum(name: str, values: tuple[str, ...]) -> sa.Enum:
    return sa.Enum(*values, name=name, native_enum=False, create_constraint=True)


def _in(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IS NULL OR {column} IN ({', '.join(repr(v) for v in values)})"


EPISODE_COLUMNS = (
    ("root_id", ID),
    ("structure_id", ID),
    ("structure_version", sa.Integer()),
    ("module_id", ID),
    ("edge_id", ID),
    ("goal", sa.Text()),
    ("observation", sa.JSON()),
    ("source_ref", sa.Text()),
    ("environment_version", ID),
    ("skill_id", ID),
    ("skill_version", sa.Integer()),
    ("model_version", sa.String(128)),
    ("arguments", sa.JSON()),
    ("rationale", sa.Text()),
    ("confidence", sa.Double()),
    ("escalations", sa.JSON()),
    ("tool", sa.String(128)),
    ("allowed_effects", sa.JSON()),
    ("idempotency_key", sa.String(128)),
    ("result", sa.JSON()),
    ("verifier_version", ID),
    ("status", sa.String(16)),
    ("status_reason", ID),
    ("failure_kind", sa.String(32)),
    ("feedback", sa.JSON()),
    ("cost", sa.Double()),
    ("cost_detail", sa.JSON()),
    ("latency_ms", sa.Double()),
    ("retries", sa.Integer()),
)

EPISODE_CHECKS = (
    ("episode_status", _in("status", ("success", "failure", "hold", "request"))),
    (
        "episode_failure_kind",
        _in("failure_kind", ("input_interpretation", "policy", "execution", "verification")),
    ),
    ("episode_layer", _in("layer", LAYERS)),
    (
        "failure_is_typed",
        "(status IS NULL AND failure_kind IS NULL)"
        " OR ((status = 'failure') = (failure_kind IS NOT NULL))",
    ),
    (
        "hold_has_reason",
        "status IS NULL OR status NOT IN ('hold', 'request') OR status_reason IS NOT NULL",
    ),
    ("skill_pinned", "(skill_id IS NULL) = (skill_version IS NULL)"),
    ("confidence_range", "confidence IS NULL OR (confidence >= 0 AND confidence <= 1)"),
    (
        "resources_non_negative",
        "(cost IS NULL OR cost >= 0) AND (latency_ms IS NULL OR latency_ms >= 0)"
        " AND (retries IS NULL OR retries >= 0)",
    ),
)


def _skill_tables() -> None:
    op.create_table(
        "skills",
        sa.Column("skill_id", ID, nullable=False),
        sa.Column("owner", ID, nullable=False),
        sa.Column("task_family", ID, nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("skill_id", name=op.f("pk_skills")),
    )
    op.create_index(op.f("ix_skills_owner"), "skills", ["owner"])
    json_fields = (
        "source_experiences",
        "trigger",
        "input_contract",
        "options",
        "argument_schema",
        "procedure",
        "evaluation_set",
        "counter_examples",
        "post_conditions",
        "permissions",
        "budget",
        "idempotency",
        "rejection_conditions",
    )
    op.create_table(
        "skill_versions",
        sa.Column("skill_id", ID, nullable=False),
        sa.Column("version", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("owner", ID, nullable=False),
        *(sa.Column(name, sa.JSON(), nullable=False) for name in json_fields),
        sa.Column("task_family", ID, nullable=False),
        sa.Column("environment_version", ID, nullable=False),
        sa.Column("valid_from", TS, nullable=True),
        sa.Column("valid_until", TS, nullable=True),
        sa.Column("layer", _enum("skill_layer", LAYERS), nullable=False),
        sa.Column("action", sa.JSON(), nullable=True),
        sa.Column("confidence_floor", sa.Double(), nullable=False),
        sa.Column("quality_floor", sa.Double(), nullable=False),
        sa.Column("retry_limit", sa.Integer(), nullable=False),
        sa.Column("escalation_target", _enum("escalation_target", LAYERS), nullable=False),
        sa.Column("previous_version", sa.Integer(), nullable=True),
        sa.Column("state", _enum("skill_state", STATES), nullable=False),
        sa.Column("rollout_fraction", sa.Double(), nullable=True),
        sa.Column("source_file", sa.Text(), nullable=False),
        sa.Column("source_yaml", sa.Text(), nullable=False),
        sa.Column("spec_sha256", sa.String(64), nullable=False),
        sa.Column("mlflow_model_version", sa.String(32), nullable=True),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("state_changed_at", TS, nullable=False),
        sa.CheckConstraint("version >= 1", name=op.f("ck_skill_versions_version_positive")),
        sa.CheckConstraint(
            "previous_version IS NULL OR previous_version < version",
            name=op.f("ck_skill_versions_previous_is_older"),
        ),
        sa.CheckConstraint(
            "quality_floor >= 0 AND quality_floor <= 1",
            name=op.f("ck_skill_versions_quality_floor"),
        ),
        sa.CheckConstraint(
            "confidence_floor >= 0 AND confidence_floor <= 1",
            name=op.f("ck_skill_versions_confidence_floor"),
        ),
        sa.CheckConstraint("retry_limit >= 0", name=op.f("ck_skill_versions_retry_limit")),
        sa.CheckConstraint(
            "rollout_fraction IS NULL OR (rollout_fraction > 0 AND rollout_fraction <= 1)",
            name=op.f("ck_skill_versions_rollout_fraction"),
        ),
        sa.CheckConstraint(
            "valid_until IS NULL OR valid_from IS NULL OR valid_until > valid_from",
            name=op.f("ck_skill_versions_validity_period"),
        ),
        sa.ForeignKeyConstraint(
            ["skill_id"], ["skills.skill_id"], name=op.f("fk_skill_versions_skill_id_skills")
        ),
        sa.ForeignKeyConstraint(
            ["skill_id", "previous_version"],
            ["skill_versions.skill_id", "skill_versions.version"],
            name="fk_skill_versions_previous_skill_versions",
        ),
        sa.PrimaryKeyConstraint("skill_id", "version", name=op.f("pk_skill_versions")),
    )
    op.create_index(
        "uq_skill_versions_one_active",
        "skill_versions",
        ["skill_id"],
        unique=True,
        sqlite_where=sa.text("state = 'active'"),
        postgresql_where=sa.text("state = 'active'"),
    )
    op.create_index("ix_skill_versions_family_state", "skill_versions", ["task_family", "state"])
    op.create_table(
        "skill_transitions",
        sa.Column("transition_id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("skill_id", ID, nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("from_state", _enum("from_state", STATES), nullable=True),
        sa.Column("to_state", _enum("to_state", STATES), nullable=False),
        sa.Column("evidence", sa.JSON(), nullable=False),
        sa.Column("actor", ID, nullable=False),
        sa.Column("mlflow_run_id", sa.String(64), nullable=True),
        sa.Column("at", TS, nullable=False),
        sa.ForeignKeyConstraint(
            ["skill_id", "version"],
            ["skill_versions.skill_id", "skill_versions.version"],
            name="fk_skill_transitions_version_skill_versions",
        ),
        sa.PrimaryKeyConstraint("transition_id", name=op.f("pk_skill_transitions")),
    )
    op.create_index("ix_skill_transitions_version", "skill_transitions", ["skill_id", "version"])


def _queue_and_executor_tables() -> None:
    op.create_table(
        "review_queue",
        sa.Column("review_id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column(
            "kind",
            _enum("review_kind", ("new_input_format", "environment_change", "unknown_task_family")),
            nullable=False,
        ),
        sa.Column("task_family", ID, nullable=False),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("environment_version", ID, nullable=True),
        sa.Column("detail", sa.JSON(), nullable=False),
        sa.Column("first_episode_id", ID, nullable=True),
        sa.Column("last_episode_id", ID, nullable=True),
        sa.Column("occurrences", sa.Integer(), nullable=False),
        sa.Column("status", _enum("review_status", ("open", "resolved")), nullable=False),
        sa.Column(
            "resolution",
            _enum("review_resolution", ("accepted", "rejected", "duplicate")),
            nullable=True,
        ),
        sa.Column("resolution_note", sa.Text(), nullable=True),
        sa.Column("resolved_by", ID, nullable=True),
        sa.Column("first_seen_at", TS, nullable=False),
        sa.Column("last_seen_at", TS, nullable=False),
        sa.Column("resolved_at", TS, nullable=True),
        sa.CheckConstraint(
            "(status = 'resolved') = (resolution IS NOT NULL AND resolved_at IS NOT NULL)",
            name=op.f("ck_review_queue_resolved_has_verdict"),
        ),
        sa.CheckConstraint("occurrences >= 1", name=op.f("ck_review_queue_occurrences")),
        sa.PrimaryKeyConstraint("review_id", name=op.f("pk_review_queue")),
        sa.UniqueConstraint("kind", "task_family", "fingerprint", name="uq_review_queue_cause"),
    )
    op.create_index(op.f("ix_review_queue_status"), "review_queue", ["status"])
    op.create_table(
        "tool_calls",
        sa.Column("tool", sa.String(128), nullable=False),
        sa.Column("idempotency_key", sa.String(128), nullable=False),
        sa.Column("arguments_sha256", sa.String(64), nullable=False),
        sa.Column("arguments", sa.JSON(), nullable=False),
        sa.Column("caller", ID, nullable=False),
        sa.Column(
            "status",
            _enum("tool_call_status", ("pending", "done", "failed", "unverified")),
            nullable=False,
        ),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("owner", ID, nullable=False),
        sa.Column("started_at", TS, nullable=False),
        sa.Column("finished_at", TS, nullable=True),
        sa.PrimaryKeyConstraint("tool", "idempotency_key", name=op.f("pk_tool_calls")),
    )
    op.create_table(
        "rate_buckets",
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("capacity", sa.Double(), nullable=False),
        sa.Column("refill_per_s", sa.Double(), nullable=False),
        sa.Column("tokens", sa.Double(), nullable=False),
        sa.Column("updated_at", sa.Double(), nullable=False),
        sa.CheckConstraint(
            "capacity > 0 AND refill_per_s >= 0", name=op.f("ck_rate_buckets_bucket_shape")
        ),
        sa.CheckConstraint(
            "tokens >= 0 AND tokens <= capacity", name=op.f("ck_rate_buckets_tokens_in_range")
        ),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_rate_buckets")),
    )


def upgrade() -> None:
    _skill_tables()
    _queue_and_executor_tables()
    with op.batch_alter_table("episodes", schema=None) as batch_op:
        for name, type_ in EPISODE_COLUMNS:
            batch_op.add_column(sa.Column(name, type_, nullable=True))
        for name, condition in EPISODE_CHECKS:
            batch_op.create_check_constraint(op.f(f"ck_episodes_{name}"), condition)
        batch_op.create_index(op.f("ix_episodes_root_id"), ["root_id"])
        batch_op.create_index(op.f("ix_episodes_idempotency_key"), ["idempotency_key"])
        batch_op.create_index("ix_episodes_skill_version", ["skill_id", "skill_version"])
        batch_op.create_index("ix_episodes_family_status", ["task_family", "status"])
        batch_op.create_foreign_key(
            "fk_episodes_skill_version_skill_versions",
            "skill_versions",
            ["skill_id", "skill_version"],
            ["skill_id", "version"],
        )


def downgrade() -> None:
    with op.batch_alter_table("episodes", schema=None) as batch_op:
        batch_op.drop_constraint("fk_episodes_skill_version_skill_versions", type_="foreignkey")
        batch_op.drop_index("ix_episodes_family_status")
        batch_op.drop_index("ix_episodes_skill_version")
        batch_op.drop_index(op.f("ix_episodes_idempotency_key"))
        batch_op.drop_index(op.f("ix_episodes_root_id"))
        for name, _ in EPISODE_CHECKS:
            batch_op.drop_constraint(op.f(f"ck_episodes_{name}"), type_="check")
        for name, _ in reversed(EPISODE_COLUMNS):
            batch_op.drop_column(name)
    op.drop_table("rate_buckets")
    op.drop_table("tool_calls")
    op.drop_index(op.f("ix_review_queue_status"), table_name="review_queue")
    op.drop_table("review_queue")
    op.drop_index("ix_skill_transitions_version", table_name="skill_transitions")
    op.drop_table("skill_transitions")
    op.drop_index("ix_skill_versions_family_state", table_name="skill_versions")
    op.drop_index("uq_skill_versions_one_active", table_name="skill_versions")
    op.drop_table("skill_versions")
    op.drop_index(op.f("ix_skills_owner"), table_name="skills")
    op.drop_table("skills")
