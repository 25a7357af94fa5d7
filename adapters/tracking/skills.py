"""MLflow lineage of REFLEX skills: every skill version is a registered model version.

Each skill is the registered model `reflex_skill.<skill_id>`; each ledger version is one
of its model versions, created from a run of the `skill-versions` experiment that holds
the skill's YAML (`skill/<skill_id>.yaml`) and its full list of source experiences
(`skill/source_experiences.json`) as artifacts. The model version carries as tags the
ledger version, the parent (previous version and `derived_from`), the source
experiences (count, and the IDs when they fit in a tag) and the lifecycle state.

Every lifecycle move is its own run, tagged with the move and carrying the evidence
(metrics prefixed by their kind, the full evidence as `evidence.json`); the ledger's
transition row stores that run's ID. Aliases follow the state, never the deprecated
stages: `champion` points at the active version, `challenger` at the limited one, and an
alias is removed from a version that is quarantined, rejected or retired. A move the
ledger refuses leaves its run FAILED with the reason, so refusals are visible too.

The artifact root is explicit (`artifact_root`), so runs never land in the working dir.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from adapters.tracking.context import KIND_TAG, MODEL_TRAINING
from adapters.tracking.redact import redacting_client
from reflexmem.ledger.reflex_enums import SkillState
from reflexmem.reflex.lifecycle import Evidence
from reflexmem.reflex.skills import SkillSpec
from reflexmem.reflex.tracking import register_tracked as _register_tracked
from reflexmem.reflex.tracking import transition_tracked as _transition_tracked
from reflexmem.reflex.versions import TransitionRecord, VersionInfo

EXPERIMENT = "skill-versions"
DESCRIPTION = (
    "REFLEX skill versions (registered models reflex_skill.<id>) and every lifecycle move "
    "with its evidence; aliases champion (active) and challenger (limited)."
)
CHAMPION, CHALLENGER = "champion", "challenger"
_TAG_LIMIT = 5000


def _lineage(spec: SkillSpec) -> dict[str, Any]:
    """Provenance fields worth a tag: the lesson pattern and memory rule a version came from."""
    keep = ("kind", "namespace", "pattern", "rule", "outcome_class")
    return {k: v for k, v in spec.provenance.items() if k in keep and v is not None}


def model_name(skill_id: str) -> str:
    """The registered model of a skill."""
    return f"reflex_skill.{skill_id}"


class SkillTracker:
    """Registers skill versions and records lifecycle moves in an MLflow tracking store."""

    def __init__(self, tracking_uri: str, *, artifact_root: str | Path) -> None:
        self.tracking_uri = tracking_uri
        root = str(artifact_root)
        self.artifact_root = root if "://" in root else Path(root).resolve().as_uri()
        self._client: Any = None
        self._experiment_id: str | None = None

    @property
    def client(self) -> Any:
        """The MLflow client, created on first use (MLflow takes seconds to import)."""
        if self._client is None:
            self._client = redacting_client(self.tracking_uri)
        return self._client

    def experiment_id(self) -> str:
        """The `skill-versions` experiment (created with the explicit artifact root)."""
        if self._experiment_id is None:
            found = self.client.get_experiment_by_name(EXPERIMENT)
            if found is not None:
                self._experiment_id = found.experiment_id
            else:
                self._experiment_id = self.client.create_experiment(
                    EXPERIMENT, artifact_location=self.artifact_root,
                    tags={"mlflow.note.content": DESCRIPTION, KIND_TAG: MODEL_TRAINING},
                )  # fmt: skip
        return self._experiment_id

    def _ensure_model(self, spec: SkillSpec) -> str:
        from mlflow.exceptions import MlflowException

        name = model_name(spec.skill_id)
        try:
            self.client.create_registered_model(
                name,
                tags={"reflexmem.owner": spec.owner, "reflexmem.task_family": spec.task_family},
                description=f"REFLEX skill {spec.skill_id} of role {spec.owner}",
            )
        except MlflowException as exc:
            if "RESOURCE_ALREADY_EXISTS" not in str(exc.error_code):
                raise
        return name

    def find_version(self, skill_id: str, version: int) -> str | None:
        """The model version mirroring `skill_id@version`, if registered."""
        for mv in self.client.search_model_versions(f"name='{model_name(skill_id)}'"):
            if mv.tags.get("reflexmem.skill_version") == str(version):
                return str(mv.version)
        return None

    def register(self, spec: SkillSpec, state: SkillState) -> str:
        """Create (or find) the model version of `spec`; returns its MLflow version."""
        found = self.find_version(spec.skill_id, spec.version)
        if found is not None:
            return found
        name = self._ensure_model(spec)
        sources = list(spec.source_experiences)
        joined = ",".join(sources)
        tags = {
            "reflexmem.skill_id": spec.skill_id,
            "reflexmem.skill_version": str(spec.version),
            "reflexmem.parent_version": str(spec.previous_version or "none"),
            "reflexmem.derived_from": spec.derived_from or "none",
            "reflexmem.source_experiences": joined if len(joined) <= _TAG_LIMIT else "artifact",
            "reflexmem.source_experience_count": str(len(sources)),
            "reflexmem.lifecycle_state": str(state),
            "reflexmem.layer": str(spec.layer),
            "reflexmem.task_family": spec.task_family,
            "reflexmem.environment_version": spec.environment_version,
            "reflexmem.spec_sha256": spec.sha256,
            **{f"reflexmem.provenance.{k}": str(v)[:_TAG_LIMIT] for k, v in _lineage(spec).items()},
        }
        run = self.client.create_run(
            self.experiment_id(),
            tags={"mlflow.runName": spec.key, "reflexmem.kind": "skill-version", **tags},
        )
        run_id = run.info.run_id
        self.client.log_text(run_id, spec.source_yaml, f"skill/{spec.skill_id}.yaml")
        self.client.log_text(run_id, json.dumps(sources), "skill/source_experiences.json")
        for key in ("owner", "task_family", "environment_version"):
            self.client.log_param(run_id, key, str(getattr(spec, key)))
        self.client.log_param(run_id, "layer", str(spec.layer))
        self.client.log_param(run_id, "quality_floor", str(spec.quality_floor))
        self.client.set_terminated(run_id, "FINISHED")
        mv = self.client.create_model_version(
            name,
            source=f"{run.info.artifact_uri}/skill",
            run_id=run_id,
            tags=tags,
            description=str(spec.raw.get("description", "")),
        )
        return str(mv.version)

    def open_move(self, info: VersionInfo, to: SkillState, evidence: Sequence[Evidence]) -> str:
        """Start the run of one lifecycle move, with its evidence; returns the run ID."""
        from mlflow.entities import Metric

        run = self.client.create_run(
            self.experiment_id(),
            tags={
                "mlflow.runName": f"{info.key} {info.state}->{to}",
                "reflexmem.kind": "skill-transition",
                "reflexmem.skill_id": info.skill_id,
                "reflexmem.skill_version": str(info.version),
                "reflexmem.from_state": str(info.state),
                "reflexmem.to_state": str(to),
            },
        )
        now = int(time.time() * 1000)
        metrics = [
            Metric(f"{e.kind}.{k}", float(v), now, 0)
            for e in evidence
            for k, v in e.metrics.items()
            if math.isfinite(float(v))
        ]
        metrics += [Metric(f"{e.kind}.passed", float(e.passed), now, 0) for e in evidence]
        self.client.log_batch(run.info.run_id, metrics=metrics)
        payload = json.dumps([e.as_json() for e in evidence], default=str, indent=1)
        self.client.log_text(run.info.run_id, payload, "evidence.json")
        return str(run.info.run_id)

    def finish_move(self, run_id: str, records: Sequence[TransitionRecord], mlflow: str) -> None:
        """Tag the model versions with their new states, move the aliases, close the run."""
        for record in records:
            version = mlflow if record.version == records[-1].version else None
            version = version or self.find_version(record.skill_id, record.version)
            if version is not None:
                self._apply_state(record.skill_id, version, record.to_state)
        self.client.set_terminated(run_id, "FINISHED")

    def log_check(
        self,
        info: VersionInfo,
        kind: str,
        evidence: Sequence[Evidence],
        detail: Mapping[str, Any],
    ) -> str:
        """An evaluation that moved nothing (an audit, a failed revalidation): a finished run."""
        from mlflow.entities import Metric

        run = self.client.create_run(
            self.experiment_id(),
            tags={
                "mlflow.runName": f"{info.key} {kind} ({info.state})",
                "reflexmem.kind": "skill-check",
                "reflexmem.check": kind,
                "reflexmem.skill_id": info.skill_id,
                "reflexmem.skill_version": str(info.version),
                "reflexmem.state": str(info.state),
                "reflexmem.passed": str(all(e.passed for e in evidence)).lower(),
            },
        )
        now = int(time.time() * 1000)
        metrics = [
            Metric(f"{e.kind}.{k}", float(v), now, 0)
            for e in evidence
            for k, v in e.metrics.items()
            if math.isfinite(float(v))
        ]
        metrics += [Metric(f"{e.kind}.passed", float(e.passed), now, 0) for e in evidence]
        self.client.log_batch(run.info.run_id, metrics=metrics)
        payload = {"evidence": [e.as_json() for e in evidence], "detail": dict(detail)}
        self.client.log_text(
            run.info.run_id, json.dumps(payload, default=str, indent=1), "check.json"
        )
        self.client.set_terminated(run.info.run_id, "FINISHED")
        return str(run.info.run_id)

    def fail_move(self, run_id: str, reason: str) -> None:
        """Mark the run of a refused move."""
        self.client.set_tag(run_id, "reflexmem.refused", reason[:_TAG_LIMIT])
        self.client.set_terminated(run_id, "FAILED")

    def _apply_state(self, skill_id: str, version: str, state: SkillState) -> None:
        name = model_name(skill_id)
        self.client.set_model_version_tag(name, version, "reflexmem.lifecycle_state", str(state))
        aliases = self.aliases(skill_id)
        for alias, target in aliases.items():
            if target == version and alias in (CHAMPION, CHALLENGER):
                keep = (alias == CHAMPION and state == SkillState.ACTIVE) or (
                    alias == CHALLENGER and state == SkillState.LIMITED
                )
                if not keep:
                    self.client.delete_registered_model_alias(name, alias)
        if state == SkillState.ACTIVE:
            self.client.set_registered_model_alias(name, CHAMPION, version)
        elif state == SkillState.LIMITED:
            self.client.set_registered_model_alias(name, CHALLENGER, version)

    def aliases(self, skill_id: str) -> dict[str, str]:
        """Alias -> model version of a skill's registered model."""
        model = self.client.get_registered_model(model_name(skill_id))
        return {str(k): str(v) for k, v in (model.aliases or {}).items()}


register_tracked = _register_tracked
"""Register in the ledger, then as an MLflow model version, then link (see the core)."""
transition_tracked = _transition_tracked
"""One lifecycle move in the ledger, recorded as an MLflow run (see the core)."""
