"""Structure versions in the MLflow model registry, with their lineage and evaluation.

Each structure version becomes one version of the registered model
`reflexmem-structure`: an MLflow run (experiment `structure-versions`) logs the YAML
as the artifact `structure/structure.yaml`, the evaluation data as JSON, the archive
as Parquet, the generation, selection and final-test task sets as dataset inputs
(contexts `generation`, `selection`, `final_test`), the parameters and metrics; the
model version points at the YAML, carries the parent (ID and its model version), the
operator and its steps, the search and the per-family success as tags, and gets the
alias `current-<family>` for every task family it now serves plus `current`.
(`log_inputs(models=...)` is Databricks-only, so evaluation data travel as datasets
and tags.) The ledger row of the version stores the model version number, and the
version's tags name the ledger structure ID, so either side leads to the other. A
rollback moves the quarantined version's aliases back to the restored version.

The tracking URI is always passed in (`sqlite:///...`), the artifact root is set
explicitly on the experiment, and MLflow is imported inside the methods.
"""

from __future__ import annotations

import json
import tempfile
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from adapters.tracking.context import KIND_TAG, MODEL_TRAINING
from reflexmem.structures import persist
from reflexmem.structures.model import Structure
from reflexmem.structures.report import alias_for

MODEL = "reflexmem-structure"
EXPERIMENT = "structure-versions"
DESCRIPTION = (
    "Structure G versions (registered model reflexmem-structure): YAML, parent, operator, "
    "task sets as dataset inputs; aliases current and current-<family>."
)
TAG_LIMIT = 4900


@contextmanager
def _quiet() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        warnings.filterwarnings("ignore", category=FutureWarning)
        warnings.filterwarnings("ignore", message=".*SQLAlchemy.*")
        warnings.filterwarnings("ignore", message=".*dataset source can be interpreted.*")
        yield


def default_artifact_root(tracking_uri: str) -> str:
    """`mlflow-artifacts/` beside a `sqlite:///` store (explicit, never the CWD)."""
    if not tracking_uri.startswith("sqlite:///"):
        raise ValueError("pass artifact_location for a non-SQLite tracking URI")
    db = Path(tracking_uri.removeprefix("sqlite:///"))
    return (db.parent / "mlflow-artifacts").resolve().as_uri()


@dataclass(frozen=True)
class RegisteredVersion:
    """Where a structure version landed in MLflow."""

    model: str
    version: str
    run_id: str
    aliases: tuple[str, ...]


class StructureRegistry:
    """Registers structure versions; reads them back by alias or structure ID."""

    def __init__(
        self, tracking_uri: str, artifact_location: str | None = None, model: str = MODEL
    ) -> None:
        self.tracking_uri = tracking_uri
        self.artifact_location = artifact_location or default_artifact_root(tracking_uri)
        self.model = model
        self._client: Any = None

    @property
    def client(self) -> Any:
        """The MLflow client (tracking and registry on the same URI)."""
        if self._client is None:
            with _quiet():
                from adapters.tracking.redact import redacting_client

                self._client = redacting_client(self.tracking_uri, self.tracking_uri)
        return self._client

    def _experiment(self) -> str:
        found = self.client.get_experiment_by_name(EXPERIMENT)
        if found is not None:
            return str(found.experiment_id)
        return str(
            self.client.create_experiment(
                EXPERIMENT,
                artifact_location=self.artifact_location,
                tags={"mlflow.note.content": DESCRIPTION, KIND_TAG: MODEL_TRAINING},
            )
        )

    def _ensure_model(self) -> None:
        from mlflow.exceptions import MlflowException

        try:
            self.client.get_registered_model(self.model)
        except MlflowException:
            self.client.create_registered_model(
                self.model,
                description="REFLEX structure G versions (docs/design.md §11), with lineage.",
            )

    def version_of(self, structure_id: str) -> Any | None:
        """The model version registered for a structure ID, if any."""
        with _quiet():
            found = self.client.search_model_versions(
                f"name = '{self.model}' and tags.`reflexmem.structure_id` = '{structure_id}'"
            )
        return found[0] if found else None

    def by_alias(self, alias: str) -> Any:
        """The model version an alias points at."""
        with _quiet():
            return self.client.get_model_version_by_alias(self.model, alias)

    def register(
        self,
        structure: Structure,
        *,
        operator: str,
        steps: Sequence[dict[str, Any]] = (),
        parents: Sequence[str] = (),
        families: Sequence[str] = (),
        evaluation: dict[str, Any] | None = None,
        metrics: dict[str, float] | None = None,
        datasets: dict[str, list[dict[str, Any]]] | None = None,
        archive: list[dict[str, Any]] | None = None,
        search_id: str | None = None,
    ) -> RegisteredVersion:
        """Log one structure version as a run and register it; set its aliases."""
        import math

        import pandas as pd

        with _quiet():
            import mlflow
            from mlflow.entities import Metric, Param, RunTag

            parent_id = structure.parent_id
            parent_mv = self.version_of(parent_id) if parent_id else None
            tags = {
                "reflexmem.structure_id": structure.structure_id,
                "reflexmem.parent_id": parent_id or "",
                "reflexmem.parent_version": "" if parent_mv is None else str(parent_mv.version),
                "reflexmem.parents": ",".join(parents),
                "reflexmem.operator": operator,
                "reflexmem.steps": json.dumps(list(steps))[:TAG_LIMIT],
                "reflexmem.fingerprint": structure.fingerprint(),
                "reflexmem.lifecycle": structure.lifecycle.value,
                "reflexmem.search_id": search_id or "",
            }
            sel = (evaluation or {}).get("selection", {}).get("success", {})
            tags |= {f"reflexmem.selection_success.{f}": f"{v:.4f}" for f, v in sel.items()}
            run = self.client.create_run(
                self._experiment(),
                tags={"mlflow.runName": f"structure-{structure.structure_id}", **tags},
            )
            run_id = str(run.info.run_id)
            self.client.log_batch(
                run_id,
                params=[
                    Param("structure_id", structure.structure_id),
                    Param("parent_id", parent_id or ""),
                    Param("operator", operator[:6000]),
                    Param("modules", str(len(structure.modules))),
                    Param("edges", str(len(structure.edges))),
                ],
                metrics=[
                    Metric(k, float(v), 0, 0)
                    for k, v in (metrics or {}).items()
                    if math.isfinite(float(v))
                ],
                tags=[RunTag(k, v) for k, v in tags.items()],
            )
            self.client.log_text(run_id, structure.to_yaml(), "structure/structure.yaml")
            if evaluation is not None:
                self.client.log_text(
                    run_id, json.dumps(evaluation, indent=2, default=str), "evaluation.json"
                )
            with tempfile.TemporaryDirectory() as tmp:
                if archive:
                    path = Path(tmp) / "archive.parquet"
                    frame = pd.DataFrame(archive)
                    for col in frame.columns:
                        if frame[col].map(lambda v: isinstance(v, dict | list)).any():
                            frame[col] = frame[col].map(json.dumps)
                    frame.to_parquet(path)
                    self.client.log_artifact(run_id, str(path))
                if datasets:
                    previous = mlflow.get_tracking_uri()
                    mlflow.set_tracking_uri(self.tracking_uri)
                    try:
                        with mlflow.start_run(run_id=run_id):
                            for context, rows in datasets.items():
                                path = Path(tmp) / f"{context}.parquet"
                                df = pd.DataFrame(rows)
                                df.to_parquet(path)
                                mlflow.log_artifact(str(path), artifact_path="datasets")
                                ds = mlflow.data.from_pandas(  # type: ignore[attr-defined]
                                    df, source=str(path), name=f"{structure.structure_id}-{context}"
                                )
                                mlflow.log_input(ds, context=context)
                    finally:
                        mlflow.set_tracking_uri(previous)
            self.client.set_terminated(run_id, "FINISHED")
            self._ensure_model()
            mv = self.client.create_model_version(
                self.model,
                source=f"runs:/{run_id}/structure",
                run_id=run_id,
                tags=tags,
                description=structure.description or None,
            )
            aliases = [alias_for(f) for f in families]
            if families:
                aliases.append("current")
            for alias in aliases:
                self.client.set_registered_model_alias(self.model, alias, mv.version)
        return RegisteredVersion(self.model, str(mv.version), run_id, tuple(aliases))

    def move_aliases(self, from_id: str, to_id: str) -> dict[str, Any]:
        """Move every alias on `from_id`'s model version to `to_id`'s (a rollback).

        Registry aliases only, never stages. Idempotent: a second call finds no alias
        left on the quarantined version. If the restored version was never registered,
        the aliases are removed, so no alias keeps marking a quarantined version.
        """
        with _quiet():
            src, dst = self.version_of(from_id), self.version_of(to_id)
            out: dict[str, Any] = {
                "model": self.model,
                "from_version": None if src is None else str(src.version),
                "to_version": None if dst is None else str(dst.version),
                "aliases": [],
            }
            if src is None:
                return out
            aliases = sorted(self.client.get_model_version(self.model, src.version).aliases)
            for alias in aliases:
                if dst is None:
                    self.client.delete_registered_model_alias(self.model, alias)
                else:
                    self.client.set_registered_model_alias(self.model, alias, dst.version)
            self.client.set_model_version_tag(
                self.model, src.version, "reflexmem.lifecycle", "quarantined"
            )
            if dst is not None:
                self.client.set_model_version_tag(
                    self.model, dst.version, "reflexmem.lifecycle", "active"
                )
        out["aliases"] = aliases
        out["removed" if dst is None else "moved"] = True
        return out

    def structure_yaml(self, version: str) -> str:
        """The YAML artifact of a model version, read back from the artifact store."""
        with _quiet():
            mv = self.client.get_model_version(self.model, version)
            path = self.client.download_artifacts(mv.run_id, "structure/structure.yaml")
        return Path(path).read_text(encoding="utf-8")


def register_stored(
    engine: sa.Engine,
    registry: StructureRegistry,
    structure_id: str,
    **extra: Any,
) -> RegisteredVersion:
    """Register a ledger version in MLflow and write the model version back to the ledger."""
    with engine.connect() as conn:
        stored = persist.get_version(conn, structure_id)
        parents = [r["parent_id"] for r in persist.lineage_parents(conn, structure_id)]
    if stored is None:
        raise KeyError(f"no structure version {structure_id!r}")
    done = registry.version_of(structure_id)
    if done is not None:
        return RegisteredVersion(registry.model, str(done.version), str(done.run_id), ())
    reg = registry.register(
        stored.structure,
        operator=stored.operator,
        steps=[s.to_dict() for s in stored.steps],
        parents=parents,
        **extra,
    )
    with engine.begin() as conn:
        persist.set_mlflow(conn, structure_id, reg.model, reg.version)
    return reg


class StructureTracker:
    """The core's `StructureTracking` seam over the MLflow structure registry."""

    def __init__(self, tracking_uri: str, artifact_location: str | None = None) -> None:
        self.registry = StructureRegistry(tracking_uri, artifact_location)

    def register(self, engine: sa.Engine, structure_id: str, **extra: Any) -> dict[str, Any]:
        """Register the ledger version (once); its model, version, run and aliases."""
        reg = register_stored(engine, self.registry, structure_id, **extra)
        return {
            "model": reg.model,
            "version": reg.version,
            "run_id": reg.run_id,
            "aliases": reg.aliases,
        }

    def roll_back(self, quarantined_id: str, restored_id: str) -> dict[str, Any]:
        """Move the quarantined version's aliases (`current`, `current-<family>`) back."""
        return self.registry.move_aliases(quarantined_id, restored_id)
