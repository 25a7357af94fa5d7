"""What the benchmarks share: scratch ledgers, resources over them, a timing runner.

Every benchmark runs on freshly migrated scratch databases (a SQLite file, or a
PostgreSQL database created on `REFLEX_BENCH_POSTGRES_URL` and dropped afterwards), so
its figures never depend on what a user's ledger holds.
"""

from __future__ import annotations

import resource
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa

from adapters import migrate
from adapters.db import make_engine
from reflexmem.operations.resources import Resources
from reflexmem.operations.runner import DirectRunner
from reflexmem.settings import Settings

R = TypeVar("R")


@contextmanager
def scratch_url(settings: Settings, backend: str, workdir: Path) -> Iterator[str]:
    """The URL of a freshly migrated scratch ledger, dropped afterwards."""
    if backend == "sqlite":
        url = f"sqlite:///{workdir / f'{uuid.uuid4().hex}.sqlite'}"
        engine = make_engine(url)
        try:
            migrate.upgrade(engine)
        finally:
            engine.dispose()
        yield url
        return
    name = f"reflex_bench_{uuid.uuid4().hex[:12]}"
    admin = make_engine(settings.bench_postgres_url).execution_options(isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    rendered = (
        sa.make_url(settings.bench_postgres_url)
        .set(database=name)
        .render_as_string(hide_password=False)
    )
    engine = make_engine(rendered)
    try:
        migrate.upgrade(engine)
        engine.dispose()
        yield rendered
    finally:
        engine.dispose()
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@contextmanager
def scratch_engine(settings: Settings, backend: str, workdir: Path) -> Iterator[sa.Engine]:
    """An engine on a freshly migrated scratch ledger."""
    with scratch_url(settings, backend, workdir) as url:
        engine = make_engine(url)
        try:
            yield engine
        finally:
            engine.dispose()


def scratch_settings(url: str, workdir: Path, name: str) -> Settings:
    """Settings for one benchmark path: its ledger, its own MLflow store and artifacts."""
    return Settings(
        home=workdir / name,
        database_url=url,
        mlflow_tracking_uri=f"sqlite:///{workdir / f'mlflow-{name}.sqlite'}",
        artifact_root=workdir / f"artifacts-{name}",
    )


def without_tracking(res: Resources) -> Resources:
    """The same resources recording nothing in MLflow."""
    from reflexmem.operations.resources import NullTracker

    return replace(res, tracker=NullTracker())


def warm_tracker(res: Resources) -> None:
    """Create the MLflow store and experiment now, so no timed stage pays for it."""
    from adapters.tracking.eval import EvaluationTracker

    if isinstance(res.tracker, EvaluationTracker):
        res.tracker.experiment_id()


def peak_rss_mb() -> float:
    """Peak resident set size of the current process so far, in MB."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class TimingRunner(DirectRunner):
    """A direct runner that adds up wall and process CPU seconds per operation.

    On a shared machine the wall seconds carry other processes' load; the CPU seconds
    (user + system of this process) are what a stage itself costs. It also notes the
    process's peak RSS after each operation: the peak only grows, so the stage at which
    it jumps is the one that holds the most memory.
    """

    def __init__(self, resources: Resources) -> None:
        super().__init__(resources)
        self.seconds: dict[str, float] = {}
        self.peak_rss_after: dict[str, float] = {}
        self.cpu_seconds: dict[str, float] = {}

    def _timed(self, name: str, call: Callable[[], R]) -> R:
        cpu, start = _cpu_s(), time.perf_counter()
        try:
            return call()
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start
            self.peak_rss_after[name] = peak_rss_mb()
            self.cpu_seconds[name] = self.cpu_seconds.get(name, 0.0) + _cpu_s() - cpu

    def run(self, op: Callable[..., R], /, **params: Any) -> R:
        """Run and time one stage."""
        return self._timed(op.__name__, lambda: super(TimingRunner, self).run(op, **params))

    def map(
        self, op: Callable[..., R], key: str, values: Sequence[Any], /, **params: Any
    ) -> list[R]:
        """Run and time one stage over every value."""
        return self._timed(
            op.__name__, lambda: super(TimingRunner, self).map(op, key, values, **params)
        )
