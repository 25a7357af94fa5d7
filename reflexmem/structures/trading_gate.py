"""Pre-decision checks under the active trading structure: its pins and what its edges lend.

While the `trading` scope has an active bundle, the check stage
(`operations.skills.check_decisions`) judges each window of decisions under it:

- a skill the structure pins decides at its pinned version only (other versions of it
  stay out); a skill the structure does not name decides as it would without one, so a
  check learned after the structure was chosen is not silenced;
- a decision also goes through the checks its role's module receives over an edge
  carrying `checks` (or holds as a merged module), judged as the lending role would
  judge it, exactly as the structure search replayed it (`trading.applied_checks`);
- every judged decision whose role the structure handles is recorded with the bundle
  it ran under (`decision_structures`), which is where its lineage ends.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

import polars as pl

from reflexmem.reflex.gate import check_frame
from reflexmem.reflex.snapshot import SkillSnapshot
from reflexmem.reflex.trading import TRADE_FAMILY, observation_json
from reflexmem.registry import RoleRegistry
from reflexmem.structures.bundle import Bundle
from reflexmem.structures.model import Structure
from reflexmem.structures.trading import applied_checks, skill_role, subgoal

SCOPE = "trading"


def bundle_pins(bundle: Bundle, structure: Structure) -> dict[str, str]:
    """Skill ID -> version as the bundle pins it (the structure's pins where it says none)."""
    return structure.pins.versions | {v.split("@", 1)[0]: v for v in bundle.skill_versions}


def pinned_snapshot(snapshot: SkillSnapshot, pins: Mapping[str, str]) -> SkillSnapshot:
    """The snapshot with every pinned skill at its pinned version only."""
    keep = tuple(
        p for p in snapshot.skills if p.spec.skill_id not in pins or p.key == pins[p.spec.skill_id]
    )
    return SkillSnapshot(keep, snapshot.taken_at)


def lent_rows(
    snapshot: SkillSnapshot,
    structure: Structure,
    pins: Mapping[str, str],
    decisions: pl.DataFrame,
    registry: RoleRegistry,
) -> pl.DataFrame | None:
    """Check rows of the checks another role's module applies to these decisions."""
    usable = {p.key: p for p in snapshot.usable(TRADE_FAMILY)}
    parts: list[pl.DataFrame] = []
    for role in sorted(decisions["role_id"].unique().drop_nulls().to_list()):
        own, lent = applied_checks(structure, subgoal(role), pins)
        keys = [*own, *(k for ks in lent.values() for k in ks)]
        by_role: dict[str, list[str]] = {}
        for key in dict.fromkeys(keys):
            skill = usable.get(key)
            source = None if skill is None else skill_role(skill)
            if source is not None and source != role:
                by_role.setdefault(source, []).append(key)
        if not by_role:
            continue
        mine = decisions.filter(pl.col("role_id") == role)
        observed = pl.DataFrame(
            {
                "decision_id": mine["decision_id"],
                "observation": observation_json(mine, registry),
            }
        )
        for source, ks in sorted(by_role.items()):
            borrowed = SkillSnapshot(tuple(usable[k] for k in ks), snapshot.taken_at)
            rows = check_frame(
                borrowed, mine.with_columns(pl.lit(source).alias("role_id")), registry
            )
            # The record keeps the decision as it was made (its own role).
            fixed = rows.drop("observation").join(
                observed, on="decision_id", how="left", maintain_order="left"
            )
            parts.append(fixed.select(rows.columns))
    return pl.concat(parts, how="vertical_relaxed") if parts else None


def ran_under(
    bundle: Bundle, structure: Structure, decisions: pl.DataFrame, at: datetime
) -> pl.DataFrame:
    """`decision_structures` rows: each decision whose role the structure handles."""
    handled = [
        r
        for r in decisions["role_id"].unique().drop_nulls().to_list()
        if subgoal(str(r)) in structure.handler_of
    ]
    mine = decisions.filter(pl.col("role_id").is_in(handled))
    return mine.select(
        pl.col("decision_id"),
        pl.lit(bundle.bundle_id).alias("bundle_id"),
        pl.lit(structure.structure_id).alias("structure_id"),
        pl.lit(at).alias("checked_at"),
    )
