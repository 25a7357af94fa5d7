"""Stages of evaluation (docs/design.md §6): evaluate matured cases, replay, promote.

Each batch is one ledger transaction plus its tracking run: the run is opened before
the write (its ID goes into the rows), finished after the commit, and marked failed if
the write fails. Reports are small values (IDs and counts), so they cross process
boundaries cheaply; the batch's rows stay in the ledger and its tracking run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from reflexmem.evaluation import (
    EvaluationResult,
    PromotionResult,
    evaluate_matured,
)
from reflexmem.evaluation import promote as promote_runs
from reflexmem.evaluation import replay as replay_runs
from reflexmem.operations.resources import Resources, opened_runs


@dataclass(frozen=True)
class EvaluationReport:
    """One evaluation or replay batch."""

    batch_id: str
    kind: str
    profile: str
    profile_version: int
    runs: int
    roles: tuple[str, ...]
    mlflow_run_id: str | None

    @classmethod
    def of(cls, result: EvaluationResult) -> EvaluationReport:
        """The report of a written batch."""
        info = result.info
        return cls(
            info.batch_id,
            info.kind,
            info.profile,
            info.profile_version,
            result.n_runs,
            info.roles,
            result.mlflow_run_id,
        )


@dataclass(frozen=True)
class PromotionReport:
    """One promotion batch: how many runs became primary and how many they replaced."""

    batch_id: str
    profile: str
    promoted: int
    replaced: int
    mlflow_run_id: str | None
    profile_version: int = 0


def evaluate(
    res: Resources,
    profile: str | None = None,
    version: int | None = None,
    roles: Sequence[str] | None = None,
    cycle_id: str | None = None,
) -> EvaluationReport:
    """Evaluate every matured case not yet evaluated under the profile (idempotent)."""
    chosen = res.benchmark_profile(profile, version)
    with opened_runs(res.tracker, cycle_id) as opener, res.engine.begin() as conn:
        result = evaluate_matured(conn, res.prices, chosen, roles=roles, open_run=opener)
    res.tracker.finish_evaluation(result)
    return EvaluationReport.of(result)


def replay(
    res: Resources,
    profile: str | None = None,
    version: int | None = None,
    roles: Sequence[str] | None = None,
    decisions: Sequence[str] | None = None,
    cycle_id: str | None = None,
) -> EvaluationReport:
    """Re-evaluate decisions that have a primary run: new runs, none promoted."""
    chosen = res.benchmark_profile(profile, version)
    with opened_runs(res.tracker, cycle_id) as opener, res.engine.begin() as conn:
        result = replay_runs(
            conn, res.prices, chosen, roles=roles, decisions=decisions, open_run=opener
        )
    res.tracker.finish_evaluation(result)
    return EvaluationReport.of(result)


def promote(
    res: Resources,
    profile: str | None = None,
    version: int | None = None,
    source_batch: str | None = None,
    run_ids: Sequence[str] | None = None,
    only_unpromoted: bool = False,
    cycle_id: str | None = None,
) -> PromotionReport:
    """Make the newest matching run of each decision its one primary run.

    `only_unpromoted` restricts to decisions without a primary yet: the cycle's initial
    promotion, which therefore also picks up a batch whose promotion a crash cut off.
    """
    name = profile or res.profile
    with opened_runs(res.tracker, cycle_id) as opener, res.engine.begin() as conn:
        result: PromotionResult = promote_runs(
            conn,
            name,
            version=version,
            source_batch=source_batch,
            run_ids=run_ids,
            only_unpromoted=only_unpromoted,
            open_run=opener,
        )
    res.tracker.finish_promotion(result)
    replaced = (
        int(result.promotions["previous_run_id"].is_not_null().sum()) if result.promoted else 0
    )
    return PromotionReport(
        result.info.batch_id,
        name,
        result.promoted,
        replaced,
        result.mlflow_run_id,
        result.info.profile_version,
    )
