"""Evaluation profiles and role skill files as registered model versions in MLflow.

Both are versioned definitions a reviewer must be able to pin a result to: an
evaluation run was computed with profile `spy_daily` v2, a lesson was judged against a
role declared by skill file `equity_research` v1. Each becomes a registered model
(`reflexmem-profile.<name>`, `reflexmem-role-skill.<skill>`) whose versions are made
from a run of the `definitions` experiment holding the definition as a YAML artifact;
the version carries its definition version, content digest and parent (the previous
version) as tags. Aliases: a profile's `profile-v<N>` per version, `default` (the
version a run gets when none is asked for) and `newest` (MLflow reserves `latest` and
`v<N>`); a role skill's `current` (the file as shipped now). Registration is
idempotent by content digest, so calling it on every batch costs one search once the
definitions are registered.
"""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path
from typing import Any

import yaml

from adapters.tracking.context import source_tags
from adapters.tracking.runs import RunStore
from reflexmem.evaluation.profiles import COMPONENTS, PROFILES, get_profile
from reflexmem.registry import RoleRegistry
from reflexmem.settings import Settings

EXPERIMENT = "definitions"
DESCRIPTION = (
    "Versioned definitions (evaluation profiles, role skill files). One run per "
    "registered model version; the YAML artifact is the definition itself."
)
PROFILE_MODEL = "reflexmem-profile.{name}"
ROLE_SKILL_MODEL = "reflexmem-role-skill.{skill}"


def profile_yaml(name: str, version: int) -> str:
    """The profile as YAML: every field of the recipe plus the components it computes."""
    profile = get_profile(name, version)
    data = {**dataclasses.asdict(profile), "components": list(COMPONENTS)}
    return yaml.safe_dump(data, sort_keys=False)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class DefinitionRegistry:
    """Registers profile and role-skill versions; finds the model version of one."""

    def __init__(self, store: RunStore) -> None:
        self.store = store
        self._known: dict[tuple[str, str], str] = {}

    @property
    def client(self) -> Any:
        """The store's MLflow client."""
        return self.store.client

    def _experiment(self) -> str:
        return self.store.experiment(EXPERIMENT, DESCRIPTION)

    def _versions(self, model: str) -> list[Any]:
        from mlflow.exceptions import MlflowException

        try:
            self.client.get_registered_model(model)
        except MlflowException:
            return []
        found = self.client.search_model_versions(f"name = '{model}'")
        return sorted(found, key=lambda mv: int(mv.version))

    def _register(
        self, model: str, description: str, text: str, file: str, tags: dict[str, str]
    ) -> str:
        """A new model version of `model` holding `text` as `definition/<file>`."""
        from mlflow.exceptions import MlflowException

        try:
            self.client.create_registered_model(model, description=description)
        except MlflowException as exc:
            if "RESOURCE_ALREADY_EXISTS" not in str(exc.error_code):
                raise
        run = self.client.create_run(
            self._experiment(),
            tags={"mlflow.runName": f"{model} {tags['reflexmem.definition_version']}",
                  "reflexmem.kind": "definition", **tags, **source_tags()},
        )  # fmt: skip
        run_id = run.info.run_id
        self.client.log_text(run_id, text, f"definition/{file}")
        self.client.set_terminated(run_id, "FINISHED")
        mv = self.client.create_model_version(
            model, source=f"runs:/{run_id}/definition", run_id=run_id, tags=tags,
            description=description,
        )  # fmt: skip
        return str(mv.version)

    def ensure_profile(self, name: str, version: int) -> str:
        """Register every shipped version of profile `name`; the model version of `version`."""
        key = (f"profile:{name}", str(version))
        if key in self._known:
            return self._known[key]
        model = PROFILE_MODEL.format(name=name)
        have = {mv.tags.get("reflexmem.sha256"): str(mv.version) for mv in self._versions(model)}
        parent = "none"
        shipped = sorted(v for n, v in PROFILES if n == name)
        for v in shipped:
            text = profile_yaml(name, v)
            digest = _sha(text)
            mv = have.get(digest)
            if mv is None:
                tags = {
                    "reflexmem.profile": name,
                    "reflexmem.definition_version": str(v),
                    "reflexmem.profile_version": str(v),
                    "reflexmem.parent_version": parent,
                    "reflexmem.sha256": digest,
                }
                mv = self._register(
                    model,
                    f"Evaluation profile {name} (docs/design.md §6)",
                    text,
                    f"{name}.yaml",
                    tags,
                )
                self.client.set_registered_model_alias(model, f"profile-v{v}", mv)
            self._known[(f"profile:{name}", str(v))] = mv
            parent = str(v)
        if shipped:
            self.client.set_registered_model_alias(model, "default", self._known[
                (f"profile:{name}", str(shipped[0]))])  # fmt: skip
            self.client.set_registered_model_alias(model, "newest", self._known[
                (f"profile:{name}", str(shipped[-1]))])  # fmt: skip
        return self._known.get(key, "")

    def ensure_role_skill(self, skill: str, source: Path, roles: list[str]) -> str:
        """Register skill file `skill` as shipped now (if new); its model version."""
        text = source.read_text(encoding="utf-8")
        digest = _sha(text)
        key = (f"role-skill:{skill}", digest)
        if key in self._known:
            return self._known[key]
        model = ROLE_SKILL_MODEL.format(skill=skill)
        versions = self._versions(model)
        mv = next((str(v.version) for v in versions if v.tags.get("reflexmem.sha256") == digest),
                  None)  # fmt: skip
        if mv is None:
            declared = yaml.safe_load(text) or {}
            parent = versions[-1] if versions else None
            tags = {
                "reflexmem.skill": skill,
                "reflexmem.definition_version": str(declared.get("version", "")),
                "reflexmem.roles": ",".join(sorted(roles)),
                "reflexmem.parent_version": str(parent.version) if parent else "none",
                "reflexmem.parent_definition_version": (
                    parent.tags.get("reflexmem.definition_version", "") if parent else "none"
                ),
                "reflexmem.sha256": digest,
                "reflexmem.file": source.name,
            }
            mv = self._register(
                model, f"Role skill file {skill}: the roles it declares", text, source.name, tags
            )
        self.client.set_registered_model_alias(model, "current", mv)
        self._known[key] = mv
        return mv

    def ensure_roles(self, registry: RoleRegistry) -> dict[str, tuple[str, str]]:
        """Every role skill file of the registry; role -> (registered model, version)."""
        files: dict[str, tuple[Path, list[str]]] = {}
        for role in registry.roles.values():
            files.setdefault(role.skill, (role.source, []))[1].append(role.id)
        out: dict[str, tuple[str, str]] = {}
        for skill, (source, roles) in sorted(files.items()):
            mv = self.ensure_role_skill(skill, source, roles)
            for role_id in roles:
                out[role_id] = (ROLE_SKILL_MODEL.format(skill=skill), mv)
        return out


def sync_definitions(settings: Settings, registry: RoleRegistry) -> dict[str, Any]:
    """Register every shipped profile version and role skill file; what is registered."""
    store = RunStore(settings.resolved_tracking_uri, settings.resolved_artifact_root, "")
    definitions = DefinitionRegistry(store)
    profiles = {
        PROFILE_MODEL.format(name=name): {
            str(v): definitions.ensure_profile(name, v) for n, v in sorted(PROFILES) if n == name
        }
        for name in sorted({n for n, _ in PROFILES})
    }
    roles = definitions.ensure_roles(registry)
    return {"profiles": profiles, "role_skills": {r: list(mv) for r, mv in roles.items()}}
