"""Open an existing store for review (notebooks, the report) without ever creating one.

A review reads what a cycle left behind. Pointed at the wrong folder it must say so,
not quietly create an empty SQLite ledger (SQLAlchemy creates the file on first
connect) and report that nothing happened: `open_store` refuses a missing ledger file
or an unmigrated ledger with a message naming the location and the command to run, and
opens the MLflow store only if it exists.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from adapters import migrate
from adapters.db import make_engine
from adapters.lineage import Links
from adapters.tracking.context import existing_client
from reflexmem.settings import Settings


class StoreMissing(RuntimeError):
    """There is no migrated ledger where the settings point."""


@dataclass
class ReviewStore:
    """An opened ledger, its MLflow client (None if that store does not exist), links."""

    settings: Settings
    engine: sa.Engine
    client: Any | None

    @property
    def links(self) -> Links:
        """MLflow run links with the configured UI base URL."""
        return Links(self.client, self.settings.mlflow_ui_url)

    def close(self) -> None:
        """Release the ledger's connections."""
        self.engine.dispose()


def open_store(settings: Settings | None = None) -> ReviewStore:
    """The ledger and MLflow store the settings name; `StoreMissing` if there is none."""
    s = settings or Settings()
    url = s.resolved_database_url
    if url.startswith("sqlite:///"):
        path = Path(url.removeprefix("sqlite:///"))
        if not path.exists():
            raise StoreMissing(
                f"no ledger at {path} (REFLEX_HOME={s.home.resolve()}): run `make demo`, or "
                "point REFLEX_HOME / REFLEX_DATABASE_URL at an existing store"
            )
    engine = make_engine(url)
    try:
        migrate.require_current(engine)
    except migrate.SchemaNotCurrent as exc:
        engine.dispose()
        raise StoreMissing(str(exc)) from exc
    return ReviewStore(s, engine, existing_client(s.resolved_tracking_uri))
