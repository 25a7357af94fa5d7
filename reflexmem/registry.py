"""Role registry: analysis skills declare roles in YAML files shipped with the project.

There is no generic fallback role. A role ID declared twice, a role used but declared
nowhere, or a malformed policy stops start-up with an error naming the file and the ID,
because a silently merged role would mix one role's lessons into another's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import yaml
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError

from reflexmem.executor_types import Effect

SKILLS_DIR = Path(__file__).with_name("skills")


class RegistryError(ValueError):
    """The shipped skill files do not describe a consistent set of roles."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Maturation(_Strict):
    """How long after the decision its outcome is worth judging."""

    days: int = Field(ge=0)


class OutcomeProbe(_Strict):
    """Which settled quantity says whether the role was right, over how many bars.

    `horizon_bars` counts trading bars of the decision's symbol (daily or intraday, as
    ingested), not calendar days: the exit is the close of the N-th bar after the entry
    bar, so a weekend or a holiday inside the horizon costs nothing. Role files written
    before the rename say `horizon_days`; it is read as the same bar count.
    """

    kind: Literal["forward_return", "excess_return", "risk_adjusted"]
    horizon_bars: int = Field(ge=1, validation_alias=AliasChoices("horizon_bars", "horizon_days"))
    benchmark: str | None = None


class RequiredEvidence(_Strict):
    """Evidence the role must have had, fresh enough, at decision time."""

    kind: str
    max_age_days: float = Field(gt=0)


class RolePermissions(_Strict):
    """The most a role's skills may ever do: tools by name and effects (default: read only).

    A REFLEX skill owned by the role can hold a subset of these and never more, so
    granting a role a tool is a reviewed change to its file, not a skill's decision.
    """

    tools: tuple[str, ...] = ()
    effects: tuple[Effect, ...] = (Effect.READ,)


class RolePolicy(_Strict):
    """A role's reflection policy: what can go wrong and how to judge it."""

    id: str = Field(pattern=r"^[a-z][a-z0-9_]{1,62}$")
    description: str
    failure_modes: tuple[str, ...] = Field(min_length=1)
    maturation: Maturation
    outcome_probe: OutcomeProbe
    required_evidence: tuple[RequiredEvidence, ...] = ()
    reflection_prompt: str = Field(min_length=10)
    permissions: RolePermissions = RolePermissions()


class SkillFile(_Strict):
    """One analysis skill and the roles it declares or uses."""

    skill: str
    version: int = Field(ge=1)
    roles: tuple[RolePolicy, ...] = ()
    uses: tuple[str, ...] = ()


@dataclass(frozen=True)
class Role:
    """A registered role with the skill file that declared it."""

    policy: RolePolicy
    skill: str
    source: Path

    @property
    def id(self) -> str:
        """The stable role ID."""
        return self.policy.id


@dataclass(frozen=True)
class RoleRegistry:
    """The validated, immutable set of roles."""

    roles: Mapping[str, Role]

    def __contains__(self, role_id: object) -> bool:
        return role_id in self.roles

    def get(self, role_id: str) -> Role:
        """The role, or a `KeyError` naming the unknown ID (never a fallback)."""
        try:
            return self.roles[role_id]
        except KeyError:
            raise KeyError(f"role {role_id!r} is not registered") from None

    @property
    def ids(self) -> tuple[str, ...]:
        """Registered role IDs, sorted."""
        return tuple(sorted(self.roles))


def _read(path: Path) -> SkillFile:
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise RegistryError(f"{path}: not valid YAML: {exc}") from exc
    try:
        return SkillFile.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        role = _role_id_at(raw, first["loc"])
        named = f" (role {role!r})" if role else ""
        raise RegistryError(f"{path}: {where}{named}: {first['msg']}") from exc


def _role_id_at(raw: object, loc: tuple[int | str, ...]) -> str | None:
    if isinstance(raw, dict) and len(loc) >= 2 and loc[0] == "roles" and isinstance(loc[1], int):
        roles = raw.get("roles")
        if isinstance(roles, list) and loc[1] < len(roles) and isinstance(roles[loc[1]], dict):
            value = roles[loc[1]].get("id")
            return str(value) if value is not None else None
    return None


def load_registry(paths: Iterable[Path] | None = None) -> RoleRegistry:
    """Read and validate skill files (default: the ones shipped in `reflexmem/skills/`)."""
    files = sorted(paths) if paths is not None else sorted(SKILLS_DIR.glob("*.yaml"))
    if not files:
        raise RegistryError(f"no skill files found (looked in {SKILLS_DIR})")
    roles: dict[str, Role] = {}
    uses: list[tuple[Path, str]] = []
    for path in files:
        skill = _read(path)
        for policy in skill.roles:
            if policy.id in roles:
                first = roles[policy.id].source
                raise RegistryError(
                    f"{path}: role {policy.id!r} is declared twice (first in {first})"
                )
            roles[policy.id] = Role(policy=policy, skill=skill.skill, source=path)
        uses.extend((path, role_id) for role_id in skill.uses)
    for path, role_id in uses:
        if role_id not in roles:
            raise RegistryError(f"{path}: role {role_id!r} is used but declared in no skill file")
    return RoleRegistry(roles=roles)
