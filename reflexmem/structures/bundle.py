"""Bundles (structure + skill versions + index version) and drift on the active one.

A bundle is what runs: one structure version with the skill versions and the knowledge
index it was validated with, as plain strings (the skill lifecycle owns what a skill
version *is*). It must agree with the structure's own pins, so a structure can never
run with skills it was not checked with. Rolling back moves all three together.

Drift compares the active bundle's recent success per task family with its baseline
(the success recorded when it was activated): a one-sided two-proportion z-test per
family, drift when z >= 3 (the classic three-sigma control limit, about 1 false alarm
in 740 checks per family) and the recent window holds at least 20 episodes of that
family (below that the test has too little power to mean anything). Both values are
declared, not fitted.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from reflexmem.structures.model import Structure
from reflexmem.structures.refusals import Refusal, RefusalKind, StructureRefused

DRIFT_Z = 3.0
MIN_EPISODES = 20


@dataclass(frozen=True)
class Bundle:
    """A structure version pinned with its skill versions and knowledge-index version."""

    bundle_id: str
    scope: str
    structure_id: str
    skill_versions: tuple[str, ...]
    index_version: str

    def to_dict(self) -> dict[str, Any]:
        """Plain form."""
        return {
            "bundle_id": self.bundle_id,
            "scope": self.scope,
            "structure_id": self.structure_id,
            "skill_versions": list(self.skill_versions),
            "index_version": self.index_version,
        }


def bundle_id(scope: str, structure_id: str, skills: Sequence[str], index: str) -> str:
    """A bundle's ID: a hash of its scope, structure and pins (skill versions sorted)."""
    key = "|".join([scope, structure_id, *sorted(skills), index])
    return f"bundle-{hashlib.sha256(key.encode()).hexdigest()[:16]}"


def bundle_for(structure: Structure, scope: str) -> Bundle:
    """The bundle of a structure's own pins (its ID hashes scope, structure and pins)."""
    skills = tuple(sorted(structure.pins.versions.values()))
    bid = bundle_id(scope, structure.structure_id, skills, structure.pins.index)
    return Bundle(bid, scope, structure.structure_id, skills, structure.pins.index)


def check_bundle(bundle: Bundle, structure: Structure) -> None:
    """Refuse a bundle whose versions differ from what its structure pins."""
    problems = []
    if bundle.structure_id != structure.structure_id:
        problems.append(
            ("structure_id", f"{bundle.structure_id!r} is not {structure.structure_id!r}")
        )
    if sorted(bundle.skill_versions) != sorted(structure.pins.versions.values()):
        problems.append(("skill_versions", f"{list(bundle.skill_versions)} differ from the pins"))
    if bundle.index_version != structure.pins.index:
        problems.append(("index_version", f"{bundle.index_version!r} is not pinned"))
    if problems:
        raise StructureRefused(
            [
                Refusal(
                    RefusalKind.FILE, bundle.bundle_id, f, "bundle_pins", r, structure.structure_id
                )
                for f, r in problems
            ]
        )


@dataclass(frozen=True)
class FamilyDrift:
    """The drift test of one task family."""

    family: str
    baseline_rate: float
    baseline_n: int
    recent_rate: float
    recent_n: int
    z: float
    drifted: bool


@dataclass(frozen=True)
class DriftReport:
    """The per-family tests; `drifted` if any family drifted."""

    families: tuple[FamilyDrift, ...]
    threshold: float = DRIFT_Z
    min_episodes: int = MIN_EPISODES
    detail: dict[str, Any] = field(default_factory=dict, hash=False)

    @property
    def drifted(self) -> bool:
        """Whether any family's success dropped beyond the control limit."""
        return any(f.drifted for f in self.families)

    def to_dict(self) -> dict[str, Any]:
        """Plain form (stored with the drift event)."""
        return {
            "threshold": self.threshold,
            "min_episodes": self.min_episodes,
            "families": [f.__dict__ for f in self.families],
        }


def detect_drift(
    baseline: Mapping[str, tuple[int, int]],
    recent: Mapping[str, tuple[int, int]],
    *,
    z_threshold: float = DRIFT_Z,
    min_episodes: int = MIN_EPISODES,
) -> DriftReport:
    """Compare (successes, episodes) per family; a drop of `z_threshold` sigmas drifts."""
    out = []
    for fam in sorted(set(baseline) & set(recent)):
        (s0, n0), (s1, n1) = baseline[fam], recent[fam]
        if n0 == 0 or n1 == 0:
            continue
        p0, p1 = s0 / n0, s1 / n1
        pooled = (s0 + s1) / (n0 + n1)
        se = math.sqrt(pooled * (1 - pooled) * (1 / n0 + 1 / n1))
        z = (p0 - p1) / se if se > 0 else 0.0
        out.append(FamilyDrift(fam, p0, n0, p1, n1, z, n1 >= min_episodes and z >= z_threshold))
    return DriftReport(tuple(out), z_threshold, min_episodes)
