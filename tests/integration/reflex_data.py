"""Skill specs and evidence for the REFLEX integration tests."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import yaml

from reflexmem.reflex.lifecycle import Evidence, EvidenceKind
from reflexmem.reflex.skills import SKILLS_DIR, SkillSpec, parse_skill
from reflexmem.registry import load_registry

REGISTRY = load_registry()


def spec(
    name: str = "filing_kind_rules",
    edit: Callable[[dict[str, Any]], None] | None = None,
    **top: Any,
) -> SkillSpec:
    raw = copy.deepcopy(yaml.safe_load((SKILLS_DIR / f"{name}.yaml").read_text()))
    raw.update(top)
    if edit is not None:
        edit(raw)
    return parse_skill(yaml.safe_dump(raw, sort_keys=False), f"{name}.yaml", REGISTRY)


def next_version(name: str = "filing_kind_rules", version: int = 2, **top: Any) -> SkillSpec:
    def parent(raw: dict[str, Any]) -> None:
        raw["fallback"]["previous_version"] = version - 1
        raw["validation"]["quality_floor"] = 0.9

    return spec(name, parent, version=version, **top)


def ok(kind: EvidenceKind, **metrics: float) -> Evidence:
    base = {
        EvidenceKind.EVALUATION: {"n": 10.0, "accuracy": 1.0, "source_overlap": 0.0},
        EvidenceKind.REPLAY: {"n": 50.0, "accuracy": 0.98, "source_overlap": 0.0},
        EvidenceKind.SHADOW: {"n": 60.0, "agreement": 0.95},
        EvidenceKind.ROLLOUT: {"treated": 40.0, "control": 45.0},
        EvidenceKind.DRIFT: {"n_recent": 100.0},
    }.get(kind, {})
    return Evidence(kind, True, {**base, **metrics}, run_id=f"run-{kind}")


def bad(kind: EvidenceKind, **metrics: float) -> Evidence:
    return Evidence(kind, False, {**ok(kind).metrics, **metrics}, run_id=f"run-{kind}")
