"""Ledger tables of the legacy migration: migrated legacy rows and the retention reports.

Legacy `role_memory` rows are not role cases. A role case inherits the fact of a trade
from the execution it is linked to (`role_cases.execution_id` is a required, unique
foreign key); a legacy row names at most a decision and never an execution, so writing
it into `role_cases` would either invent an execution or break that invariant. Legacy
rows of registered roles therefore land in `legacy_cases`, the role memory's archive:
original text and provenance kept byte for byte, the decision linked when the ledger
holds it, the legacy score kept for audit only. No statistic, recall or reflection
query reads this table; rows of unregistered roles go to `quarantine`
(`legacy_unknown_role`). `legacy_migrations` stores every run's retention report.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from reflexmem.ledger.models import ID, Base


class LegacyCase(Base):
    """One migrated legacy `role_memory` row of a registered role (audit and archive only)."""

    __tablename__ = "legacy_cases"

    legacy_id: Mapped[str] = mapped_column(ID, primary_key=True)
    role_id: Mapped[str] = mapped_column(ID, index=True)
    content: Mapped[str] = mapped_column(sa.Text)
    provenance: Mapped[str | None] = mapped_column(sa.Text)
    """The legacy provenance JSON exactly as the legacy table held it."""
    legacy_score: Mapped[float | None] = mapped_column(sa.Float)
    """Audit only: never read by evaluation, statistics, recall or learning."""
    legacy_created_at: Mapped[str | None] = mapped_column(sa.String(64))
    """The legacy timestamp as text, exactly as read."""
    legacy_decision_id: Mapped[str | None] = mapped_column(ID)
    decision_id: Mapped[str | None] = mapped_column(
        sa.ForeignKey("trading_decisions.decision_id"), index=True
    )
    """`legacy_decision_id` when the ledger holds that decision, else NULL."""
    row_sha256: Mapped[str] = mapped_column(sa.String(64))
    migration_id: Mapped[str] = mapped_column(ID, index=True)
    migrated_at: Mapped[datetime]


class LegacyMigration(Base):
    """The retention report of one `reflexmem migrate legacy` run."""

    __tablename__ = "legacy_migrations"
    __table_args__ = (
        sa.CheckConstraint("rows_in = moved + quarantined + unchanged", name="retention"),
    )

    migration_id: Mapped[str] = mapped_column(ID, primary_key=True)
    source: Mapped[str] = mapped_column(sa.Text)
    """The legacy URL with any password redacted."""
    rows_in: Mapped[int]
    moved: Mapped[int]
    quarantined: Mapped[int]
    unchanged: Mapped[int]
    report: Mapped[Any] = mapped_column(sa.JSON)
    """The whole report: checksums of each group and the backup it was preceded by."""
    started_at: Mapped[datetime]
    finished_at: Mapped[datetime]
