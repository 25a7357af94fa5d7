"""Wiring shared by the CLI, the tasks and the benchmarks: settings in, ready parts out."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import sqlalchemy as sa

from infra import migrate
from infra.db import make_engine
from reflexmem.admission.admit import AdmissionResult, admit
from reflexmem.ingest.load import IngestReport, ingest_files
from reflexmem.registry import RoleRegistry, load_registry
from reflexmem.settings import Settings


def ready_engine(settings: Settings) -> sa.Engine:
    """The ledger engine with its schema migrated to head."""
    if settings.backend == "sqlite":
        settings.home.mkdir(parents=True, exist_ok=True)
    engine = make_engine(settings.resolved_database_url)
    migrate.upgrade(engine)
    return engine


def run_admission(
    engine: sa.Engine, settings: Settings, registry: RoleRegistry | None = None
) -> AdmissionResult:
    """One admission batch guarded by the Great Expectations admission suite."""
    from expectations.runner import validate_admission

    registry = registry or load_registry()
    with engine.begin() as conn:
        return admit(
            conn,
            registry.ids,
            validate_admission,
            min_points=settings.min_evaluation_points,
        )


def run_ingest(engine: sa.Engine, paths: Sequence[Path], kind: str | None = None) -> IngestReport:
    """Ingest files in one transaction (all or nothing); bars are guarded by their suite."""
    from expectations.bars import validate_bars

    with engine.begin() as conn:
        return ingest_files(
            conn,
            paths,
            kinds=[kind] * len(paths) if kind else None,
            validate_bars=validate_bars,
        )
