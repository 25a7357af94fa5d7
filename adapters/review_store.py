"""Open an existing store for review (notebooks, the report) without ever creating one.

A review reads what a cycle left behind. Pointed at the wrong folder it must say so,
not quietly create an empty SQLite ledger (SQLAlchemy creates the file on first
connect) and report that nothing happened: `open_store` refuses a missing ledger file
or an unmigrated ledger with a message naming the location and the command to run, and
opens the MLflow store only if it exists.
"""

from __future__ import annotations

import os
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


DEFAULT_HOME = Path(".reflex")


def find_home(start: Path) -> Path | None:
    """The nearest `.reflex` folder at or above `start`, or None.

    Jupyter starts a kernel in the notebook's folder, not the project's, where the
    default relative home points.
    """
    for folder in (start.resolve(), *start.resolve().parents):
        candidate = folder / DEFAULT_HOME
        if candidate.is_dir():
            return candidate
    return None


def open_store(settings: Settings | None = None) -> ReviewStore:
    """The ledger and MLflow store the settings name; `StoreMissing` if there is none.

    Without explicit settings and without `REFLEX_HOME`, the home is the nearest
    `.reflex` folder at or above the working directory, so a review started in a
    sub-folder (a notebook's) finds the project's store and its plots.
    """
    s = settings or Settings()
    if settings is None and "REFLEX_HOME" not in os.environ and s.home == DEFAULT_HOME:
        found = find_home(Path.cwd())
        if found is not None:
            s = s.model_copy(update={"home": found})
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
