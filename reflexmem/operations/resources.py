"""What an operation needs, as one typed value: the seams between the core and the world.

Every stage of the learning cycle is a function `op(resources, **params) -> report`.
`Resources` carries the parts that are chosen once from settings (by
`infra/resources.py`, the only place that knows which implementation backs each seam):
the ledger engine, the role registry, where prices come from, where evaluation runs are
tracked, how to build a reflector, the recall embedder, and the validators that guard
ingestion (market bars) and admission. The core only sees the protocols below, so it never imports
Prefect, MLflow or Great Expectations, and a test can hand in real parts of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Protocol

import polars as pl
import sqlalchemy as sa

from reflexmem.evaluation import BatchInfo, BenchmarkProfile, EvaluationResult, PromotionResult
from reflexmem.evaluation import get_profile as _get_profile
from reflexmem.executor import ToolExecutor
from reflexmem.ingest.bars import BarValidator
from reflexmem.maturation.providers import PriceProvider
from reflexmem.recall.embeddings import Embedder
from reflexmem.reflection import BudgetLimits, Reflector, RuleReflector
from reflexmem.registry import RoleRegistry

AdmissionValidator = Callable[[pl.DataFrame, Sequence[str]], pl.DataFrame]
"""(staged executions, registered role IDs) -> failures (execution_id, expectation, severity)."""


class Tracker(Protocol):
    """Where evaluation, replay and promotion batches are recorded (MLflow in infra)."""

    def open(self, info: BatchInfo) -> str | None:
        """Open the run describing a non-empty batch, before the ledger write; its ID."""
        ...

    def finish_evaluation(self, result: EvaluationResult) -> None:
        """Log what an evaluation or replay batch wrote, after the commit."""
        ...

    def finish_promotion(self, result: PromotionResult) -> None:
        """Log what a promotion batch changed, after the commit."""
        ...

    def fail(self, run_id: str) -> None:
        """Mark a run whose ledger write failed."""
        ...


class NullTracker:
    """A tracker that records nothing (tests of the ledger alone, `--no-tracking`)."""

    def open(self, info: BatchInfo) -> str | None:
        """No run."""
        return None

    def finish_evaluation(self, result: EvaluationResult) -> None:
        """Nothing to finish."""

    def finish_promotion(self, result: PromotionResult) -> None:
        """Nothing to finish."""

    def fail(self, run_id: str) -> None:
        """Nothing to mark."""


@contextmanager
def opened_runs(tracker: Tracker) -> Iterator[Callable[[BatchInfo], str | None]]:
    """Open tracking runs on demand; mark the last one FAILED if the ledger write fails."""
    opened: list[str] = []

    def opener(info: BatchInfo) -> str | None:
        run_id = tracker.open(info)
        if run_id is not None:
            opened.append(run_id)
        return run_id

    try:
        yield opener
    except BaseException:
        if opened:
            tracker.fail(opened[-1])
        raise


@dataclass(frozen=True)
class ReflectionSetup:
    """How to build the configured reflector for one role batch, and its budget.

    `build` receives the batch's guarded executor (the model adapter routes tool
    requests through it); a reflector with a `close()` method is closed after the batch.
    """

    name: str = "rules"
    build: Callable[[ToolExecutor], Reflector] = lambda _executor: RuleReflector()
    budget: BudgetLimits | None = None
    batch_limit: int = 100_000


@dataclass(frozen=True)
class Resources:
    """Everything the operations read or write, chosen once from settings."""

    engine: sa.Engine
    registry: RoleRegistry
    prices: PriceProvider
    validate_admission: AdmissionValidator
    validate_bars: BarValidator | None = None
    tracker: Tracker = field(default_factory=NullTracker)
    reflection: ReflectionSetup = field(default_factory=ReflectionSetup)
    embedder: Embedder | None = None
    min_evaluation_points: int = 3
    admission_lock_wait_s: float = 30.0
    profile: str = "spy_daily"
    profile_version: int | None = None
    memory_seed: int = 0

    def benchmark_profile(
        self, name: str | None = None, version: int | None = None
    ) -> BenchmarkProfile:
        """The evaluation profile asked for, defaulting to the configured one."""
        return _get_profile(name or self.profile, version or self.profile_version)
