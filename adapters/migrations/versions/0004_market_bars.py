"""market bars, and bar quarantine reasons

Revision ID: 0004_market_bars
Revises: 0003
Create Date: 2026-12-10 10:00:00

The table of `reflexmem.ledger.market_models` (prices as ledger input, key (symbol, ts),
CHECK close > 0) and the quarantine vocabulary for bars: subject kind `bar` and one
reason code per expectation of `expectations/bars.json`. The CHECK constraints are
rebuilt with `batch_alter_table` so that SQLite (which cannot alter a constraint)
recreates the table. The value lists are spelled out, not imported, so that this
revision keeps meaning what it meant when later revisions change the enumerations.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004_market_bars"
down_revision = "0003"
branch_labels = None
depends_on = None

SUBJECT_KINDS = ("execution", "preview_consumption")
REASONS = (
    "unknown_role",
    "automated_origin",
    "unknown_origin",
    "unverified_external",
    "preview_missing",
    "preview_unconsumed",
    "preview_reused",
    "preview_double_consume",
    "identity_mismatch",
)
BAR_REASONS = (
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
)


def _in(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def _quarantine_checks(kinds: tuple[str, ...], reasons: tuple[str, ...]) -> None:
    with op.batch_alter_table("quarantine", schema=None) as batch_op:
        batch_op.drop_constraint(op.f("ck_quarantine_subject_kind"), type_="check")
        batch_op.drop_constraint(op.f("ck_quarantine_reason_code"), type_="check")
        batch_op.create_check_constraint(
            op.f("ck_quarantine_subject_kind"), sa.text(_in("subject_kind", kinds))
        )
        batch_op.create_check_constraint(
            op.f("ck_quarantine_reason_code"), sa.text(_in("reason_code", reasons))
        )


def upgrade() -> None:
    op.create_table(
        "market_bars",
        sa.Column("symbol", sa.String(32), nullable=False),
        sa.Column("ts", sa.DateTime(timezone=True), nullable=False),
        sa.Column("open", sa.Double(), nullable=True),
        sa.Column("high", sa.Double(), nullable=True),
        sa.Column("low", sa.Double(), nullable=True),
        sa.Column("close", sa.Double(), nullable=False),
        sa.Column("volume", sa.Double(), nullable=True),
        sa.Column("source_sha256", sa.String(64), nullable=False),
        sa.Column("ingested_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("close > 0", name=op.f("ck_market_bars_close_positive")),
        sa.PrimaryKeyConstraint("symbol", "ts", name=op.f("pk_market_bars")),
    )
    op.create_index("ix_market_bars_ts", "market_bars", ["ts"])
    _quarantine_checks((*SUBJECT_KINDS, "bar"), REASONS + BAR_REASONS)


def downgrade() -> None:
    op.execute("DELETE FROM quarantine WHERE subject_kind = 'bar'")
    _quarantine_checks(SUBJECT_KINDS, REASONS)
    op.drop_index("ix_market_bars_ts", table_name="market_bars")
    op.drop_table("market_bars")
