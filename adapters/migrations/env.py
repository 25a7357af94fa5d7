"""Alembic environment: runs against the connection handed in by `adapters.migrate`."""

from __future__ import annotations

from alembic import context

from reflexmem.ledger.models import Base

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run migrations through adapters.migrate, which supplies a connection")
context.configure(
    connection=connection,
    target_metadata=Base.metadata,
    render_as_batch=connection.dialect.name == "sqlite",
    compare_type=True,
)
with context.begin_transaction():
    context.run_migrations()
