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
    """Bring the ledger schema to `revision`.

    On SQLite a migration that changes a CHECK constraint must rebuild the table, and
    dropping the old table would cascade into every child row while foreign keys are
    enforced. So, as SQLite's documentation prescribes for such changes, foreign keys
    are off while the migration runs, and `PRAGMA foreign_key_check` must find no
    dangling reference before the migration commits.
    """
    if engine.dialect.name != "sqlite":
        with engine.begin() as conn:
            command.upgrade(_config(conn), revision)
        return
    with engine.connect() as conn:
        conn.exec_driver_sql("PRAGMA foreign_keys=OFF")
        conn.commit()
        try:
            with conn.begin():
                command.upgrade(_config(conn), revision)
                broken = conn.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
                if broken:
                    raise RuntimeError(f"migration left dangling references: {broken[:5]}")
        finally:
            conn.exec_driver_sql("PRAGMA foreign_keys=ON")
            conn.commit()


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


class SchemaNotCurrent(RuntimeError):
    """The ledger is not at the code's schema revision; only `reflexmem db upgrade` migrates."""


def require_current(engine: sa.Engine) -> str:
    """The ledger's revision, or `SchemaNotCurrent` naming the command that fixes it.

    Every command other than `db upgrade` calls this instead of migrating: a read-only
    recall must never change a schema, and a stale schema must stop the command with a
    clear message rather than fail half way with a database error.
    """
    current = current_revision(engine)
    head = head_revision()
    if current == head:
        return current or ""
    where = engine.url.render_as_string(hide_password=True)
    if current is None:
        state = "has no schema yet"
    else:
        state = f"is at revision {current}, the code needs {head}"
    raise SchemaNotCurrent(f"the ledger at {where} {state}: run `reflexmem db upgrade`")
