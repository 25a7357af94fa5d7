"""The MLflow runs of one tracking store: experiments, nesting under cycles, closing runs.

`RunStore` is what the evaluation, reflection and cycle trackers share: one client on
the tracking URI, experiments created under the explicit artifact root with their
descriptions, and `create_run`, which stamps every run with its source, user, git
commit and Prefect context, and nests it under its cycle's run (`mlflow.parentRunId`,
found by the `reflexmem.cycle_id` tag, so a task in another process finds the same
parent). `CycleRuns` opens and closes those parent runs in the `learning-cycles`
experiment; closing one logs its counts and the table of the runs nested under it.
"""

from __future__ import annotations

import math
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl

from adapters.tracking.context import ensure_experiment, source_tags

CYCLE_EXPERIMENT = "learning-cycles"
DESCRIPTIONS = {
    CYCLE_EXPERIMENT: (
        "One run per learning cycle (or scheduled part of it): the parent of every "
        "evaluation, promotion and reflection run of that cycle. Tag reflexmem.cycle_id; "
        "artifact cycle_runs.parquet lists the nested runs."
    ),
    "evaluation-runs": (
        "One run per evaluation, replay or promotion batch. Find the batch of a decision "
        "with tags.reflexmem.symbols LIKE '%,SYM,%' AND tags.reflexmem.decided_dates LIKE "
        "'%,YYYY-MM-DD,%' (or `reflexmem lineage DECISION_ID`); the Parquet artifact has one "
        "row per decision with its ledger IDs and components."
    ),
    "reflection-runs": (
        "One run per reflection batch of one role: outcome-class counts, reflector and "
        "model, budget used, and the lessons table (lessons.parquet) with ledger IDs."
    ),
}


class RunStore:
    """One MLflow client, its experiments, and runs nested under their cycle."""

    def __init__(self, tracking_uri: str, artifact_root: Path | None, ledger_url: str) -> None:
        self.tracking_uri = tracking_uri
        self.artifact_root = artifact_root
        self.ledger_url = ledger_url
        self._client_obj: Any = None
        self._experiments: dict[str, str] = {}
        self._parents: dict[str, str] = {}

    @property
    def client(self) -> Any:
        """The MLflow client (created on first use; tracking and registry on one URI).

        It redacts every credential form from what it writes (`adapters/tracking/redact.py`).
        """
        if self._client_obj is None:
            from adapters.tracking.redact import redacting_client

            self._client_obj = redacting_client(self.tracking_uri, self.tracking_uri)
        return self._client_obj

    def experiment(self, name: str, description: str | None = None) -> str:
        """The experiment's ID, created under the artifact root with its description."""
        if name not in self._experiments:
            text = description or DESCRIPTIONS.get(name, "")
            self._experiments[name] = ensure_experiment(self.client, name, text, self.artifact_root)
        return self._experiments[name]

    def parent_of(self, cycle_id: str | None) -> str | None:
        """The run of cycle `cycle_id`, if one was opened (searched once per process)."""
        if cycle_id is None:
            return None
        if cycle_id not in self._parents:
            found = self.client.search_runs(
                [self.experiment(CYCLE_EXPERIMENT)],
                filter_string=f"tags.`reflexmem.cycle_id` = '{cycle_id}'",
                max_results=1,
            )
            if not found:
                return None
            self._parents[cycle_id] = str(found[0].info.run_id)
        return self._parents[cycle_id]

    def remember_parent(self, cycle_id: str, run_id: str) -> None:
        """Record the run just opened for a cycle (no search needed in this process)."""
        self._parents[cycle_id] = run_id

    def create_run(
        self, experiment: str, name: str, tags: Mapping[str, str], cycle_id: str | None
    ) -> str:
        """A new run with its source, Prefect context, ledger and cycle tags; its ID."""
        full = {"mlflow.runName": name, **source_tags(), **tags}
        full["reflexmem.ledger"] = self.ledger_url
        if cycle_id is not None:
            full["reflexmem.cycle_id"] = cycle_id
            parent = self.parent_of(cycle_id)
            if parent is not None:
                full["mlflow.parentRunId"] = parent
        run = self.client.create_run(self.experiment(experiment), tags=full)
        return str(run.info.run_id)

    def log_metrics(self, run_id: str, metrics: Mapping[str, float]) -> None:
        """Log finite metrics in one batch."""
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        clean = [Metric(k, float(v), now, 0) for k, v in metrics.items() if math.isfinite(v)]
        if clean:
            self.client.log_batch(run_id, metrics=clean)

    def log_params(self, run_id: str, params: Mapping[str, object]) -> None:
        """Log parameters in one batch."""
        from mlflow.entities import Param

        self.client.log_batch(run_id, params=[Param(k, str(v)[:6000]) for k, v in params.items()])

    def set_tags(self, run_id: str, tags: Mapping[str, str]) -> None:
        """Set tags in one batch."""
        from mlflow.entities import RunTag

        self.client.log_batch(run_id, tags=[RunTag(k, v) for k, v in tags.items()])

    def log_parquet(self, run_id: str, table: pl.DataFrame, name: str) -> None:
        """Log a table as one Parquet artifact (one columnar write, whatever its size)."""
        with tempfile.TemporaryDirectory(prefix="reflex-mlflow-") as tmp:
            path = Path(tmp) / name
            table.write_parquet(path)
            self.client.log_artifact(run_id, str(path))


class CycleRuns:
    """The parent runs of cycles, in the `learning-cycles` experiment."""

    def __init__(self, store: RunStore) -> None:
        self.store = store

    def begin(self, cycle_id: str, name: str) -> str:
        """The cycle's run: the one already opened for `cycle_id` (a retry), else a new one."""
        found = self.store.parent_of(cycle_id)
        if found is not None:
            return found
        tags = {
            "reflexmem.kind": "cycle",
            "reflexmem.cycle_name": name,
            "reflexmem.cycle_id": cycle_id,
        }
        run_id = self.store.create_run(CYCLE_EXPERIMENT, f"{name}-{cycle_id}", tags, None)
        self.store.remember_parent(cycle_id, run_id)
        return run_id

    def end(self, cycle_id: str, status: str, summary: Mapping[str, float]) -> None:
        """Log the cycle's counts and the runs nested under it, then close its run."""
        run_id = self.store.parent_of(cycle_id)
        if run_id is None:
            return
        client = self.store.client
        self.store.log_metrics(run_id, summary)
        experiments = [
            e.experiment_id
            for e in client.search_experiments()
            if e.name in ("evaluation-runs", "reflection-runs")
        ]
        children = (
            client.search_runs(experiments, filter_string=f"tags.`mlflow.parentRunId` = '{run_id}'")
            if experiments
            else []
        )
        rows = [
            {
                "run_id": r.info.run_id,
                "experiment_id": r.info.experiment_id,
                "name": r.info.run_name,
                "kind": r.data.tags.get("reflexmem.kind", ""),
                "batch_id": r.data.tags.get("reflexmem.batch_id", ""),
                "status": r.info.status,
            }
            for r in children
        ]
        if rows:
            self.store.log_parquet(run_id, pl.DataFrame(rows), "cycle_runs.parquet")
        self.store.set_tags(run_id, {"reflexmem.nested_runs": str(len(rows))})
        client.set_terminated(run_id, status)
