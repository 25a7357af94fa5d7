"""MLflow tracking of evaluation batches: one MLflow run per batch and profile version.

A run per decision would bury a reviewer under hundreds of thousands of runs; a batch
run carries the parameters (profile, version, roles), aggregate metrics, and every
evaluation run of the batch as a Parquet artifact with its ledger IDs (a `log_table` of
a large frame serialises cell by cell; Parquet is one columnar write). The ledger
stores the MLflow run ID on each `evaluation_runs` row and on the `evaluation_batches`
row, and the MLflow run's tags name the ledger batch, so either side leads to the other.
A replay and a promotion are runs of their own (tag `reflexmem.kind`).

`EvaluationTracker` is the `Tracker` of `reflexmem.operations.resources`: the evaluate
and promote operations open a run before the ledger write (its ID goes into the rows),
finish it after the commit and mark it FAILED if the write fails.
"""

from __future__ import annotations

import math
import tempfile
import time
from pathlib import Path
from typing import Any

import polars as pl

from reflexmem.evaluation.promote import PromotionResult
from reflexmem.evaluation.runs import BatchInfo, EvaluationResult, batch_metrics, tracking_table
from reflexmem.redact import redact

EXPERIMENT = "evaluation-runs"
TABLE_FILE = "evaluation_runs.parquet"
PROMOTION_FILE = "promotions.parquet"


def _client(uri: str) -> Any:
    from infra.tracking_redact import redacting_client

    return redacting_client(uri)


def _safe_url(url: str | None) -> str:
    """The ledger URL with every credential form masked (user info, secret parameters)."""
    return str(redact(url)) if url else ""


class EvaluationTracker:
    """Opens and finishes the MLflow runs of evaluation, replay and promotion batches."""

    def __init__(
        self,
        tracking_uri: str,
        *,
        ledger_url: str | None = None,
        artifact_root: Path | None = None,
    ) -> None:
        self.tracking_uri = tracking_uri
        self.ledger_url = _safe_url(ledger_url)
        self.artifact_root = artifact_root
        self._client_obj: Any = None
        self._experiment_id: str | None = None

    @property
    def client(self) -> Any:
        """The MLflow client (created on first use)."""
        if self._client_obj is None:
            self._client_obj = _client(self.tracking_uri)
        return self._client_obj

    def experiment_id(self) -> str:
        """The `evaluation-runs` experiment, created if absent (artifacts under the root)."""
        if self._experiment_id is None:
            found = self.client.get_experiment_by_name(EXPERIMENT)
            if found is not None:
                self._experiment_id = str(found.experiment_id)
            else:
                location = None
                if self.artifact_root is not None:
                    location = (self.artifact_root / EXPERIMENT).resolve().as_uri()
                self._experiment_id = str(
                    self.client.create_experiment(EXPERIMENT, artifact_location=location)
                )
        return self._experiment_id

    def open(self, info: BatchInfo) -> str:
        """Create the batch's MLflow run with its parameters and tags; return its ID."""
        from mlflow.entities import Param, RunTag

        tags = {
            "mlflow.runName": f"{info.kind}-{info.profile}-v{info.profile_version}-{info.batch_id}",
            "reflexmem.kind": info.kind,
            "reflexmem.batch_id": info.batch_id,
            "reflexmem.ledger": self.ledger_url,
            "reflexmem.profile": info.profile,
        }
        run = self.client.create_run(self.experiment_id(), tags=tags)
        run_id: str = run.info.run_id
        params = {
            "profile": info.profile,
            "profile_version": str(info.profile_version),
            "roles": ",".join(info.roles)[:6000],
            "batch_id": info.batch_id,
            "kind": info.kind,
            "n_runs": str(info.n_runs),
        }
        self.client.log_batch(
            run_id,
            params=[Param(k, v) for k, v in params.items()],
            tags=[RunTag(k, v) for k, v in tags.items() if k != "mlflow.runName"],
        )
        return run_id

    def _finish(
        self, run_id: str, metrics: dict[str, float], table: pl.DataFrame, name: str
    ) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        clean = [Metric(k, v, now, 0) for k, v in metrics.items() if math.isfinite(v)]
        self.client.log_batch(run_id, metrics=clean)
        with tempfile.TemporaryDirectory(prefix="reflex-mlflow-") as tmp:
            path = Path(tmp) / name
            table.write_parquet(path)
            self.client.log_artifact(run_id, str(path))
        self.client.set_terminated(run_id, "FINISHED")

    def finish_evaluation(self, result: EvaluationResult) -> None:
        """Log the batch's aggregate metrics and per-run table, then close its run."""
        if result.mlflow_run_id is None:
            return
        metrics = batch_metrics(result.runs)
        for role, n in result.runs.group_by("role_id").len().iter_rows():
            metrics[f"n_runs_{role}"] = float(n)
        self._finish(result.mlflow_run_id, metrics, tracking_table(result.runs), TABLE_FILE)

    def finish_promotion(self, result: PromotionResult) -> None:
        """Log which runs became primary and which they replaced, then close the run."""
        if result.mlflow_run_id is None:
            return
        frame = result.promotions
        metrics = {
            "promoted": float(frame.height),
            "replaced": float(frame["previous_run_id"].is_not_null().sum()),
        }
        self._finish(result.mlflow_run_id, metrics, frame, PROMOTION_FILE)

    def fail(self, run_id: str) -> None:
        """Mark a run whose ledger write failed, so nobody mistakes it for a finished batch."""
        self.client.set_terminated(run_id, "FAILED")
