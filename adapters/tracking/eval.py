"""MLflow tracking of the learning cycle's batches: one MLflow run per batch, nested per cycle.

A run per decision would bury a reviewer under hundreds of thousands of runs; a batch
run carries the parameters (profile, version, roles), aggregate metrics, and every
evaluation run of the batch as a Parquet artifact with its ledger IDs (a `log_table` of
a large frame serialises cell by cell; Parquet is one columnar write). The ledger
stores the MLflow run ID on each `evaluation_runs` row and on the `evaluation_batches`
row, and the MLflow run's tags name the ledger batch, so either side leads to the other.
A replay and a promotion are runs of their own (tag `reflexmem.kind`); a promotion names
the evaluation batches and MLflow runs it promoted. Every batch run logs its decision
set as a dataset input and carries the searchable tags of `tracking_sets`, and the
evaluation profile it used is a registered model version (`tracking_registry`).

`EvaluationTracker` is the `Tracker` of `reflexmem.operations.resources`: the evaluate,
promote and reflect operations open a run before the ledger write (its ID goes into
the rows), finish it after the commit and mark it FAILED if the write fails; cycles
open and close the parent runs (`tracking_runs.CycleRuns`), reflection batches are
recorded by `tracking_reflection` and distillation batches by `tracking/memory.py`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl

from adapters.tracking.memory import DistillationRuns
from adapters.tracking.reflection import ReflectionRuns
from adapters.tracking.registry import DefinitionRegistry
from adapters.tracking.runs import CycleRuns, RunStore
from adapters.tracking.sets import log_decision_set, set_tags
from reflexmem.evaluation.promote import PromotionResult
from reflexmem.evaluation.runs import BatchInfo, EvaluationResult, batch_metrics, tracking_table
from reflexmem.operations.resources import ReflectionRun
from reflexmem.redact import redact
from reflexmem.reflection.batch import RoleReport
from reflexmem.registry import RoleRegistry

EXPERIMENT = "evaluation-runs"
TABLE_FILE = "evaluation_runs.parquet"
PROMOTION_FILE = "promotions.parquet"
RUNS_QUERY = """
SELECT l.run_id, r.decision_id FROM evaluation_run_lineage l
JOIN evaluation_runs r ON r.run_id = l.run_id WHERE l.batch_id = '{batch_id}'
"""
PROMOTIONS_QUERY = """
SELECT decision_id, run_id, previous_run_id FROM evaluation_promotions
WHERE batch_id = '{batch_id}'
"""


def _safe_url(url: str | None) -> str:
    """The ledger URL with every credential form masked (user info, secret parameters)."""
    return str(redact(url)) if url else ""


def _joined(values: pl.Series) -> str:
    return ",".join(sorted({str(v) for v in values.drop_nulls().to_list()}))[:5000]


class EvaluationTracker:
    """Opens and finishes the MLflow runs of a cycle's batches and of the cycle itself."""

    def __init__(
        self,
        tracking_uri: str,
        *,
        ledger_url: str | None = None,
        artifact_root: Path | None = None,
        registry: RoleRegistry | None = None,
    ) -> None:
        self.tracking_uri = tracking_uri
        self.ledger_url = _safe_url(ledger_url)
        self.artifact_root = artifact_root
        self.store = RunStore(tracking_uri, artifact_root, self.ledger_url)
        self.definitions = DefinitionRegistry(self.store)
        self.cycles = CycleRuns(self.store)
        self.reflections = ReflectionRuns(self.store, self.definitions, registry)
        self.distillations = DistillationRuns(self.store)

    @property
    def client(self) -> Any:
        """The MLflow client (created on first use)."""
        return self.store.client

    def experiment_id(self) -> str:
        """The `evaluation-runs` experiment, created if absent (artifacts under the root)."""
        return self.store.experiment(EXPERIMENT)

    def open(self, info: BatchInfo, cycle_id: str | None = None) -> str:
        """Create the batch's MLflow run with its parameters and tags; return its ID."""
        profile_mv = self.definitions.ensure_profile(info.profile, info.profile_version)
        tags = {
            "reflexmem.kind": info.kind,
            "reflexmem.batch_id": info.batch_id,
            "reflexmem.profile": info.profile,
            "reflexmem.profile_version": str(info.profile_version),
            "reflexmem.profile_model_version": profile_mv,
        }
        name = f"{info.kind}-{info.profile}-v{info.profile_version}-{info.batch_id}"
        run_id = self.store.create_run(EXPERIMENT, name, tags, cycle_id)
        params = {
            "profile": info.profile,
            "profile_version": str(info.profile_version),
            "roles": ",".join(info.roles)[:6000],
            "batch_id": info.batch_id,
            "kind": info.kind,
            "n_runs": str(info.n_runs),
        }
        self.store.log_params(run_id, params)
        return run_id

    def _finish(
        self,
        run_id: str,
        metrics: dict[str, float],
        table: pl.DataFrame,
        name: str,
        decisions: pl.DataFrame,
        context: str,
        query: str,
        batch_id: str,
    ) -> None:
        self.store.log_metrics(run_id, metrics)
        self.store.set_tags(run_id, set_tags(decisions))
        log_decision_set(
            self.client,
            run_id,
            decisions,
            name=f"decisions-{batch_id}",
            context=context,
            ledger_url=self.ledger_url,
            query=query.format(batch_id=batch_id),
        )
        self.store.log_parquet(run_id, table, name)
        self.client.set_terminated(run_id, "FINISHED")

    def finish_evaluation(self, result: EvaluationResult) -> None:
        """Log the batch's aggregate metrics and per-run table, then close its run."""
        if result.mlflow_run_id is None:
            return
        metrics = batch_metrics(result.runs)
        for role, n in result.runs.group_by("role_id").len().iter_rows():
            metrics[f"n_runs_{role}"] = float(n)
        decisions = result.runs.select("decision_id", "run_id", "role_id", "symbol", "decided_at")
        self._finish(
            result.mlflow_run_id,
            metrics,
            tracking_table(result.runs),
            TABLE_FILE,
            decisions,
            result.info.kind,
            RUNS_QUERY,
            result.info.batch_id,
        )

    def finish_promotion(self, result: PromotionResult) -> None:
        """Log which runs became primary, what they replaced and where they came from."""
        if result.mlflow_run_id is None:
            return
        frame = result.promotions
        metrics = {
            "promoted": float(frame.height),
            "replaced": float(frame["previous_run_id"].is_not_null().sum()),
        }
        sources = {
            "reflexmem.source_batches": _joined(frame["source_batch"]),
            "reflexmem.source_mlflow_runs": _joined(frame["source_mlflow_run_id"]),
        }
        self.store.set_tags(result.mlflow_run_id, sources)
        self.store.log_params(
            result.mlflow_run_id,
            {
                "source_batch": sources["reflexmem.source_batches"][:500],
                "source_mlflow_run": sources["reflexmem.source_mlflow_runs"][:500],
            },
        )
        decisions = frame.select("decision_id", "run_id", "role_id", "symbol", "decided_at")
        self._finish(
            result.mlflow_run_id,
            metrics,
            frame,
            PROMOTION_FILE,
            decisions,
            "promotion",
            PROMOTIONS_QUERY,
            result.info.batch_id,
        )

    def open_reflection(self, run: ReflectionRun) -> str:
        """Open the run of one reflection batch (`reflection-runs`)."""
        return self.reflections.open(run)

    def finish_reflection(self, run: ReflectionRun, report: RoleReport) -> None:
        """Close the run of one reflection batch with its counts and lessons table."""
        self.reflections.finish(run, report)

    def log_distillation(
        self,
        namespace: str,
        versions: pl.DataFrame,
        counts: Mapping[str, float],
        cycle_id: str | None = None,
    ) -> str:
        """Record one distillation batch (`memory-distillation`), nested in its cycle."""
        return self.distillations.log(namespace, versions, counts, cycle_id)

    def begin_cycle(self, cycle_id: str, name: str) -> str:
        """Open (or find) the parent run of a cycle."""
        return self.cycles.begin(cycle_id, name)

    def end_cycle(self, cycle_id: str, status: str, summary: Mapping[str, float]) -> None:
        """Close a cycle's parent run."""
        self.cycles.end(cycle_id, status, summary)

    def fail(self, run_id: str) -> None:
        """Mark a run whose ledger write failed, so nobody mistakes it for a finished batch."""
        self.client.set_terminated(run_id, "FAILED")
