"""Schema migrations: `reflexmem db upgrade` and the doctor's "is it current?" check."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

MIGRATIONS = Path(__file__).with_name("migrations")


def _config(connection: sa.Connection | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def upgrade(engine: sa.Engine, revision: str = "head") -> None:
    """Bring the ledger schema to `revision`."""
    with engine.begin() as conn:
        command.upgrade(_config(conn), revision)


def downgrade(engine: sa.Engine, revision: str) -> None:
    """Take the ledger schema back to `revision` (tests of a migration's upgrade path)."""
    with engine.begin() as conn:
        command.downgrade(_config(conn), revision)


def revision(engine: sa.Engine, message: str) -> None:
    """Autogenerate a new migration against the current database (developer tool)."""
    with engine.begin() as conn:
        command.revision(_config(conn), message=message, autogenerate=True)


def head_revision() -> str | None:
    """The newest revision shipped with the code."""
    return ScriptDirectory.from_config(_config()).get_current_head()


def current_revision(engine: sa.Engine) -> str | None:
    """The revision the database is at, or None for an empty database."""
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()
