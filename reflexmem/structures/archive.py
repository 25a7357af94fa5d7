"""A diverse archive of non-dominated candidates over (success per task family, cost).

A candidate stays if no other is at least as good on every family and at least as
cheap, and strictly better somewhere; so a cheap structure that fails the composite
family (good for independent work) sits beside a dearer one that solves everything,
as the design asks. Past the capacity, the most crowded members (NSGA-II crowding
distance) go first, which keeps the archive spread along the front. Dominance is
computed on the whole objective matrix at once with numpy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from reflexmem.structures.model import Structure


@dataclass(frozen=True)
class ArchiveEntry:
    """One archived candidate with its scores and lineage."""

    candidate_id: str
    structure: Structure
    success: Mapping[str, float] = field(hash=False)
    cost: float
    passes_floor: bool
    generation: int
    parent_candidate: str | None
    lineage: tuple[dict[str, Any], ...] = field(default=(), hash=False)

    def to_dict(self) -> dict[str, Any]:
        """Plain form (ledger rows, MLflow artifact)."""
        return {
            "candidate_id": self.candidate_id,
            "fingerprint": self.structure.fingerprint(),
            "success": dict(self.success),
            "cost": self.cost,
            "passes_floor": self.passes_floor,
            "generation": self.generation,
            "parent_candidate": self.parent_candidate,
            "edges": sorted(f"{e.id}[{e.trigger}]" for e in self.structure.edges),
            "lineage": list(self.lineage),
        }


def objectives(entries: Sequence[ArchiveEntry], families: Sequence[str]) -> np.ndarray:
    """Rows to minimise: minus the success of each family, then cost."""
    return np.array(
        [[-e.success.get(f, 0.0) for f in families] + [e.cost] for e in entries], dtype=float
    ).reshape(len(entries), len(families) + 1)


def non_dominated(points: np.ndarray) -> np.ndarray:
    """Boolean mask of the rows no other row dominates (all <=, some <)."""
    if len(points) == 0:
        return np.zeros(0, dtype=bool)
    le = (points[:, None, :] <= points[None, :, :]).all(axis=2)
    lt = (points[:, None, :] < points[None, :, :]).any(axis=2)
    dominated = np.asarray((le & lt).any(axis=0), dtype=bool)
    return np.asarray(~dominated, dtype=bool)


def crowding(points: np.ndarray) -> np.ndarray:
    """NSGA-II crowding distance of each row (boundary rows: infinity)."""
    n, k = points.shape
    dist = np.zeros(n)
    if n <= 2:
        return np.full(n, np.inf)
    for j in range(k):
        order = np.argsort(points[:, j], kind="stable")
        span = points[order[-1], j] - points[order[0], j]
        dist[order[0]] = dist[order[-1]] = np.inf
        if span > 0:
            dist[order[1:-1]] += (points[order[2:], j] - points[order[:-2], j]) / span
    return dist


@dataclass(frozen=True)
class Archive:
    """The current front; :meth:`add` returns a new archive."""

    families: tuple[str, ...]
    capacity: int = 24
    entries: tuple[ArchiveEntry, ...] = ()

    def add(self, new: Sequence[ArchiveEntry]) -> Archive:
        """Merge candidates in, keep the non-dominated ones, trim by crowding."""
        seen: dict[str, ArchiveEntry] = {}
        for e in (*self.entries, *new):
            seen.setdefault(e.structure.fingerprint(), e)
        pool = list(seen.values())
        pts = objectives(pool, self.families)
        keep = [pool[i] for i in np.flatnonzero(non_dominated(pts))]
        if len(keep) > self.capacity:
            dist = crowding(objectives(keep, self.families))
            order = np.argsort(-dist, kind="stable")[: self.capacity]
            keep = [keep[i] for i in sorted(order)]
        keep.sort(key=lambda e: (e.cost, e.candidate_id))
        return Archive(self.families, self.capacity, tuple(keep))

    def __len__(self) -> int:
        return len(self.entries)
