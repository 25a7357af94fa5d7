"""Skill files built from the shipped ones, so each test changes only what it is about."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from reflexmem.reflex.skills import SKILLS_DIR, SkillSpec, parse_skill
from reflexmem.registry import RoleRegistry, load_registry
from tests.unit.reflex.reflex_helpers import MakeSpec

SHIPPED = ("filing_kind_rules", "filing_kind_policy", "filing_kind_examples")


@pytest.fixture(scope="session")
def registry() -> RoleRegistry:
    return load_registry()


@pytest.fixture(scope="session")
def shipped_raw() -> dict[str, dict[str, Any]]:
    return {name: yaml.safe_load((SKILLS_DIR / f"{name}.yaml").read_text()) for name in SHIPPED}


@pytest.fixture
def make_spec(registry: RoleRegistry, shipped_raw: dict[str, dict[str, Any]]) -> MakeSpec:
    """A spec from a shipped file with `edit(raw)` applied (source named after the skill)."""

    def build(
        name: str = "filing_kind_rules",
        edit: Callable[[dict[str, Any]], None] | None = None,
        **top: Any,
    ) -> SkillSpec:
        raw = copy.deepcopy(shipped_raw[name])
        raw.update(top)
        if edit is not None:
            edit(raw)
        return parse_skill(yaml.safe_dump(raw, sort_keys=False), f"{name}.yaml", registry)

    return build
