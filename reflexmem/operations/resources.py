"""What an operation needs, as one typed value: the seams between the core and the world.

Every stage of the learning cycle is a function `op(resources, **params) -> report`.
`Resources` carries the parts that are chosen once from settings (by
`adapters/resources.py`, the only place that knows which implementation backs each seam):
the ledger engine, the role registry, where prices come from, where evaluation runs and
skill and structure versions are tracked, how to build a reflector, the recall embedder, and the
validators that guard ingestion (market bars) and admission. The core only sees the
protocols below, so it never imports Prefect, MLflow or Great Expectations, and a test
can hand in real parts of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

import polars as pl
import sqlalchemy as sa

from reflexmem.evaluation import BatchInfo, BenchmarkProfile, EvaluationResult, PromotionResult
from reflexmem.evaluation import get_profile as _get_profile
from reflexmem.executor import ToolExecutor
from reflexmem.ingest.bars import BarValidator
from reflexmem.prices.providers import PriceProvider
from reflexmem.recall.embeddings import Embedder
from reflexmem.reflection import BudgetLimits, Reflector, RuleReflector
from reflexmem.reflection.batch import ReflectionBatch, RoleReport
from reflexmem.reflex.tracking import NullSkillTracking, SkillTracking
from reflexmem.registry import RoleRegistry

AdmissionValidator = Callable[[pl.DataFrame, Sequence[str]], pl.DataFrame]
"""(staged executions, registered role IDs) -> failures (execution_id, expectation, severity)."""


@dataclass(frozen=True)
class ReflectionRun:
    """A reflection batch as a tracker records it: the batch and how it was reflected."""

    batch: ReflectionBatch
    reflector: str
    model: str | None
    budget: BudgetLimits | None
    profile: str
    cycle_id: str | None = None


class Tracker(Protocol):
    """Where the batches of a cycle are recorded (MLflow in infra), nested per cycle.

    Evaluation, replay, promotion and reflection batches each get one run, opened
    before the ledger write (its ID goes into the ledger rows) and finished after the
    commit; a batch with a `cycle_id` is nested under that cycle's run.
    """

    def open(self, info: BatchInfo, cycle_id: str | None = None) -> str | None:
        """Open the run describing a non-empty batch, before the ledger write; its ID."""
        ...

    def finish_evaluation(self, result: EvaluationResult) -> None:
        """Log what an evaluation or replay batch wrote, after the commit."""
        ...

    def finish_promotion(self, result: PromotionResult) -> None:
        """Log what a promotion batch changed, after the commit."""
        ...

    def open_reflection(self, run: ReflectionRun) -> str | None:
        """Open the run of a reflection batch, before its summary row is written."""
        ...

    def finish_reflection(self, run: ReflectionRun, report: RoleReport) -> None:
        """Log the batch's lessons table and counts, after the commit."""
        ...

    def begin_cycle(self, cycle_id: str, name: str) -> str | None:
        """Open (or find, on a retry) the parent run of one cycle; its ID."""
        ...

    def log_distillation(
        self,
        namespace: str,
        versions: pl.DataFrame,
        counts: Mapping[str, float],
        cycle_id: str | None = None,
    ) -> str | None:
        """Record one distillation batch (its pattern and rule versions), after the commit."""
        ...

    def end_cycle(self, cycle_id: str, status: str, summary: Mapping[str, float]) -> None:
        """Close a cycle's parent run with its counts and status (FINISHED or FAILED)."""
        ...

    def fail(self, run_id: str) -> None:
        """Mark a run whose ledger write failed."""
        ...


class NullTracker:
    """A tracker that records nothing (tests of the ledger alone, `--no-tracking`)."""

    def open(self, info: BatchInfo, cycle_id: str | None = None) -> str | None:
        """No run."""
        return None

    def open_reflection(self, run: ReflectionRun) -> str | None:
        """No run."""
        return None

    def finish_reflection(self, run: ReflectionRun, report: RoleReport) -> None:
        """Nothing to finish."""

    def begin_cycle(self, cycle_id: str, name: str) -> str | None:
        """No run."""
        return None

    def log_distillation(
        self,
        namespace: str,
        versions: pl.DataFrame,
        counts: Mapping[str, float],
        cycle_id: str | None = None,
    ) -> str | None:
        """No run."""
        return None

    def end_cycle(self, cycle_id: str, status: str, summary: Mapping[str, float]) -> None:
        """Nothing to close."""

    def finish_evaluation(self, result: EvaluationResult) -> None:
        """Nothing to finish."""

    def finish_promotion(self, result: PromotionResult) -> None:
        """Nothing to finish."""

    def fail(self, run_id: str) -> None:
        """Nothing to mark."""


@contextmanager
def opened_runs(
    tracker: Tracker, cycle_id: str | None = None
) -> Iterator[Callable[[BatchInfo], str | None]]:
    """Open tracking runs on demand; mark the last one FAILED if the ledger write fails."""
    opened: list[str] = []

    def opener(info: BatchInfo) -> str | None:
        run_id = tracker.open(info, cycle_id)
        if run_id is not None:
            opened.append(run_id)
        return run_id

    try:
        yield opener
    except BaseException:
        if opened:
            tracker.fail(opened[-1])
        raise


class StructureTracking(Protocol):
    """Where structure versions are registered (the MLflow model registry in adapters)."""

    def register(
        self, engine: sa.Engine, structure_id: str, **extra: Any
    ) -> Mapping[str, Any] | None:
        """Register a ledger version (once) and write its model version back; where it went."""
        ...

    def roll_back(self, quarantined_id: str, restored_id: str) -> Mapping[str, Any] | None:
        """Move the aliases marking the quarantined version to the restored one; what moved."""
        ...


class NullStructureTracking:
    """Registers nothing (the ledger alone; tests that do not track)."""

    def register(
        self, engine: sa.Engine, structure_id: str, **extra: Any
    ) -> Mapping[str, Any] | None:
        """No registry."""
        return None

    def roll_back(self, quarantined_id: str, restored_id: str) -> Mapping[str, Any] | None:
        """No registry, no alias to move."""
        return None


@dataclass(frozen=True)
class ReflectionSetup:
    """How to build the configured reflector for one role batch, and its budget.

    `model` names the model behind a model reflector (None for rules). `build`
    receives the batch's guarded executor (the model adapter routes tool
    requests through it); a reflector with a `close()` method is closed after the batch.
    """

    name: str = "rules"
    build: Callable[[ToolExecutor], Reflector] = lambda _executor: RuleReflector()
    model: str | None = None
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
    skill_tracker: SkillTracking = field(default_factory=NullSkillTracking)
    structure_tracker: StructureTracking = field(default_factory=NullStructureTracking)
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
