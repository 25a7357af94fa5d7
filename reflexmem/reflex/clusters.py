"""Experience clusters of trading decisions: fixed conditions apart from variable arguments.

The first step of the learning path (docs/design.md §10): episodes of one task family are grouped by
what reflection taught about them. A cluster is one role's decisions that carry one
lesson (its `pattern:<key>` tag), drawn from the `fit` split only; every other fit-split
decision of the role is its contrast. For each cluster this module finds:

* the **fixed conditions**: atoms of the condition language that hold for every member
  (an evidence kind absent, dated after the decision or stale; a field equal to one
  value), ordered by how rarely they hold in the contrast;
* the **variable arguments**: fields whose values differ between members (account,
  symbol, direction, ...), which a skill carries through as template arguments;
* the smallest conjunction of fixed conditions, added rarest first, that separates the
  cluster from its contrast, with its precision and recall on the fit split.

`candidates.py` turns a cluster into L0, L1 and L2 skill files. Everything is computed
with polars over the whole split; no row is visited in Python.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from reflexmem.reflex.conditions import compile_all
from reflexmem.reflex.trading import age_field
from reflexmem.registry import RoleRegistry

MIN_CLUSTER = 10
"""Members a lesson needs in the fit split before it is generalised (fewer: an anecdote).

Ten, like the memory's distillation window: below it a share of 100 % is too easily
an accident."""
CATEGORICAL = ("direction", "scenario", "account", "symbol")
ARGUMENTS = ("account", "symbol", "direction")


@dataclass(frozen=True)
class Atom:
    """One condition on an observation field, with a name usable in a skill ID."""

    name: str
    condition: Mapping[str, Any]
    cluster_rate: float = 1.0
    contrast_rate: float = 0.0


@dataclass(frozen=True)
class Cluster:
    """One role's fit-split decisions sharing one lesson, and what separates them."""

    role_id: str
    pattern: str
    gist: str
    outcome_class: str
    members: int
    contrast: int
    fixed: tuple[Atom, ...]
    variable: tuple[str, ...]
    conjunction: tuple[Atom, ...]
    precision: float
    recall: float
    source_episodes: tuple[str, ...]

    @property
    def namespace(self) -> str:
        """The role namespace the lesson lives in."""
        return f"role:{self.role_id}"

    @property
    def base_rate(self) -> float:
        """Share of the role's fit decisions outside the cluster (what `proceed` gets right)."""
        total = self.members + self.contrast
        return self.contrast / total if total else 1.0


def role_atoms(
    registry: RoleRegistry, role_id: str, values: Mapping[str, Sequence[str]]
) -> list[Atom]:
    """Candidate atoms of a role's decisions.

    Per required evidence kind: absent, dated after the decision, stale; per categorical
    field: equal to each value seen in the cluster.
    """
    atoms: list[Atom] = []
    for req in registry.get(role_id).policy.required_evidence:
        f = age_field(req.kind)
        atoms += [
            Atom(f"{req.kind}_missing", {"field": f, "missing": True}),
            Atom(f"{req.kind}_after_decision", {"field": f, "lt": 0}),
            Atom(f"{req.kind}_stale", {"field": f, "gt": req.max_age_days}),
        ]
    for name in CATEGORICAL:
        atoms += [
            Atom(f"{name}_{_slug(v)}", {"field": name, "equals": v}) for v in values.get(name, ())
        ]
    return atoms


def _slug(value: str) -> str:
    text = "".join(ch if ch.isalnum() else "_" for ch in value.lower()).strip("_")
    return text[:16] or "x"


def _rates(frame: pl.DataFrame, atoms: Sequence[Atom]) -> list[float]:
    if frame.height == 0:
        return [0.0] * len(atoms)
    row = frame.select(
        compile_all([a.condition]).cast(pl.Float64).mean().alias(str(i))
        for i, a in enumerate(atoms)
    ).row(0)
    return [float(v or 0.0) for v in row]


def _separate(
    fixed: Sequence[Atom], members: pl.DataFrame, contrast: pl.DataFrame
) -> tuple[tuple[Atom, ...], float, float]:
    """Add fixed atoms rarest-in-contrast first while precision improves; stop at 1.0."""
    chosen: list[Atom] = []
    best_precision, recall = 0.0, 1.0
    for atom in fixed:
        if atom.contrast_rate >= atom.cluster_rate:
            break  # no longer separates anything
        trial = [*chosen, atom]
        expr = compile_all([a.condition for a in trial])
        hit_members = int(members.select(expr.sum()).item() or 0)
        hit_contrast = int(contrast.select(expr.sum()).item() or 0)
        total = hit_members + hit_contrast
        precision = hit_members / total if total else 0.0
        if precision <= best_precision:
            continue
        chosen, best_precision = trial, precision
        recall = hit_members / members.height if members.height else 0.0
        if precision >= 1.0:
            break
    return tuple(chosen), best_precision, recall


def describe(
    registry: RoleRegistry,
    text: pl.DataFrame,
    role_id: str,
    pattern: str,
    *,
    gist: str,
    outcome_class: str,
) -> Cluster:
    """Fixed conditions, variable arguments and the separating conjunction of one cluster.

    `text` holds the role's fit-split rows as text columns (`trading.text_frame`) with
    `pattern` and `episode_id`.
    """
    members = text.filter(pl.col("pattern") == pattern)
    contrast = text.filter(pl.col("pattern").is_null() | (pl.col("pattern") != pattern))
    values = {c: members[c].drop_nulls().unique().sort().to_list() for c in CATEGORICAL}
    atoms = role_atoms(registry, role_id, values)
    in_members = _rates(members, atoms)
    in_contrast = _rates(contrast, atoms)
    fixed = sorted(
        (
            Atom(a.name, a.condition, m, c)
            for a, m, c in zip(atoms, in_members, in_contrast, strict=True)
            if m >= 1.0 and members.height > 0
        ),
        key=lambda a: (a.contrast_rate, a.name),
    )
    variable = tuple(c for c in ARGUMENTS if len(values.get(c, ())) > 1)
    conjunction, precision, recall = _separate(fixed, members, contrast)
    return Cluster(
        role_id=role_id,
        pattern=pattern,
        gist=gist,
        outcome_class=outcome_class,
        members=members.height,
        contrast=contrast.height,
        fixed=tuple(fixed),
        variable=variable,
        conjunction=conjunction,
        precision=precision,
        recall=recall,
        source_episodes=tuple(members["episode_id"].to_list()),
    )


def find_patterns(fit: pl.DataFrame, *, min_members: int = MIN_CLUSTER) -> pl.DataFrame:
    """(role_id, pattern, gist, outcome_class, members) of every lesson frequent enough."""
    return (
        fit.filter(pl.col("pattern").is_not_null())
        .group_by("role_id", "pattern")
        .agg(
            pl.col("gist").first(),
            pl.col("outcome_class").first(),
            pl.len().alias("members"),
        )
        .filter(pl.col("members") >= min_members)
        .sort("role_id", "pattern")
    )
