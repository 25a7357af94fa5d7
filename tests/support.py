"""Test helpers: resources over a test ledger, and seeded ledgers built by the operations.

Tests reach the ledger the way every entry point does, through `reflexmem.operations`
with `Resources`; these helpers only choose the parts (real Great Expectations
validators, the real D-full prices, a real MLflow store when a test tracks).
"""

from __future__ import annotations

import functools
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import sqlalchemy as sa

from reflexmem.operations import intake
from reflexmem.operations.cycle import CycleParams, MaturationReport, run_maturation
from reflexmem.operations.resources import NullTracker, Resources, Tracker
from reflexmem.operations.runner import DirectRunner
from reflexmem.prices import LedgerPrices, MappingPrices, PriceProvider, dfull_prices
from reflexmem.prices.dfull_bars import write_dfull_bars
from reflexmem.prices.panel import load_dfull
from reflexmem.registry import RoleRegistry, load_registry
from reflexmem.settings import Settings
from reflexmem.synth import generate, write_stream

AS_OF = datetime(2025, 3, 28, tzinfo=UTC)
"""After the last D-full bar: every decision old enough for its role is due."""


@functools.cache
def registry() -> RoleRegistry:
    return load_registry()


@functools.cache
def dfull_mapping() -> MappingPrices:
    return dfull_prices()


def make_resources(
    engine: sa.Engine,
    *,
    prices: PriceProvider | None = None,
    tracker: Tracker | None = None,
) -> Resources:
    """Resources over a test ledger: real validators, D-full prices unless given."""
    from expectations.bars import validate_bars
    from expectations.runner import validate_admission

    return Resources(
        engine=engine,
        registry=registry(),
        prices=prices if prices is not None else dfull_mapping(),
        validate_admission=validate_admission,
        validate_bars=validate_bars,
        tracker=tracker if tracker is not None else NullTracker(),
    )


def with_ledger_prices(res: Resources, tmp: Path) -> Resources:
    """Load the D-full bars through the `bars` ingest; prices then come from the ledger."""
    intake.ingest(res, [write_dfull_bars(tmp / "bars")], "bars")
    return replace(res, prices=LedgerPrices(res.engine))


def seed_ledger(res: Resources, tmp: Path, n: int = 400, seed: int = 5) -> None:
    """A D-full-derived decision stream, ingested and admitted (role cases exist)."""
    files = write_stream(generate(load_dfull(), n, seed=seed), tmp / f"stream-{seed}")
    intake.ingest(res, files)
    intake.admit(res)


def mature_and_evaluate(res: Resources, as_of: datetime = AS_OF) -> MaturationReport:
    """The maturation part of the cycle, as the flow and the CLI run it."""
    return run_maturation(DirectRunner(res), CycleParams(as_of=as_of))


def tmp_settings(tmp: Path) -> Settings:
    """Embedded settings under `tmp`: SQLite ledger and MLflow store, artifact root."""
    return Settings(
        home=tmp / "home",
        database_url=f"sqlite:///{tmp / 'ledger.sqlite'}",
        mlflow_tracking_uri=f"sqlite:///{tmp / 'mlflow.sqlite'}",
        artifact_root=tmp / "artifacts",
    )


def migrated(settings: Settings) -> Resources:
    """Migrate the settings' ledger (what `reflexmem db upgrade` does), then its resources."""
    from adapters import migrate
    from adapters.db import make_engine
    from adapters.resources import build_resources

    if settings.backend == "sqlite":
        settings.home.mkdir(parents=True, exist_ok=True)
    engine = make_engine(settings.resolved_database_url)
    migrate.upgrade(engine)
    engine.dispose()
    return build_resources(settings)


def scalar(engine: sa.Engine, sql: str) -> int:
    with engine.connect() as conn:
        return int(conn.execute(sa.text(sql)).scalar_one())
