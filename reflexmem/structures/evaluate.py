"""Replay a structure on a task set: episode results, success per family, cost counts.

An environment that replays a whole task set at once (`BatchEnvironment`, the trading
environment) is asked to; any other runs each task through the `Runtime`. Both give
the same episode results, so everything downstream is written once.

This is the one evaluation every stage uses (freezing a parent's records, ranking
candidates on the selection set, the final test, the controls, experiment B's table
and the bundle replay), so all of them count and price the same things. Per-family
rates are aggregated with numpy over the episode arrays.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from reflexmem.structures.cost import CostCounts, CostModel, components, total
from reflexmem.structures.model import Structure
from reflexmem.structures.refusals import Refusal, RefusalLog
from reflexmem.structures.runtime import Environment, EpisodeResult, Runtime, Task


@runtime_checkable
class BatchEnvironment(Protocol):
    """An environment that replays a whole task set itself (vectorised)."""

    name: str
    verifier_id: str

    def replay_batch(
        self,
        structure: Structure,
        tasks: Sequence[Task],
        *,
        skill_versions: Mapping[str, str] | None = None,
        index_version: str | None = None,
    ) -> tuple[tuple[EpisodeResult, ...], tuple[Refusal, ...]]:
        """Episode results in task order, and the refusals raised."""
        ...


AnyEnvironment = Environment | BatchEnvironment


@dataclass(frozen=True)
class Evaluation:
    """One structure's replay of one task set."""

    structure_id: str
    fingerprint: str
    results: tuple[EpisodeResult, ...]
    counts: CostCounts
    refusals: tuple[Refusal, ...]

    @property
    def solved(self) -> int:
        """Episodes verified as successes."""
        return sum(r.solved for r in self.results)

    @property
    def value(self) -> float:
        """What the verifier credited in all (the realized return of what proceeded)."""
        return float(sum(r.value for r in self.results))

    def success_by_family(self) -> dict[str, float]:
        """Task family -> share of its episodes solved."""
        if not self.results:
            return {}
        fams = np.array([r.family for r in self.results])
        ok = np.array([r.solved for r in self.results], dtype=float)
        names, idx = np.unique(fams, return_inverse=True)
        rate = np.bincount(idx, weights=ok) / np.bincount(idx)
        return {str(n): float(v) for n, v in zip(names, rate, strict=True)}

    def failures_by_family(self) -> dict[str, dict[str, int]]:
        """Task family -> failure type -> count (holds included)."""
        out: dict[str, dict[str, int]] = {}
        for r in self.results:
            if r.failure_type is not None:
                fam = out.setdefault(r.family, {})
                fam[r.failure_type] = fam.get(r.failure_type, 0) + 1
        return out

    def cost(self, model: CostModel, search_spend: float = 0.0) -> float:
        """Total cost under `model`."""
        return total(model, self.counts, search_spend)

    def components(self, model: CostModel, search_spend: float = 0.0) -> dict[str, float]:
        """Cost by component under `model`."""
        return components(model, self.counts, search_spend)

    def signatures(self) -> dict[str, str]:
        """Task ID -> outcome and answers (what a replay must reproduce)."""
        return {r.task_id: r.signature() for r in self.results}


def count(structure: Structure, results: Sequence[EpisodeResult]) -> CostCounts:
    """The cost counters of a set of episode results under `structure` (its stored edges)."""
    return count_episodes(results, stored_edges=len(structure.edges))


COUNTERS = (
    "unneeded_areas",
    "context_entries",
    "activations",
    "messages",
    "verifications",
    "recoveries",
)
"""The per-episode counters of `CostCounts`, in the column order of `episode_counters`."""


def episode_counters(results: Sequence[EpisodeResult]) -> np.ndarray:
    """One row per episode, one column per `COUNTERS` entry."""
    return np.array(
        [
            (
                r.unneeded_areas,
                r.context_entries,
                len(r.activated),
                len(r.messages),
                len(r.verdicts),
                int(r.escalated),
            )
            for r in results
        ],
        dtype=np.int64,
    ).reshape(-1, len(COUNTERS))


def count_episodes(results: Sequence[EpisodeResult], stored_edges: int = 0) -> CostCounts:
    """The cost counters of episode results alone (one episode: what it cost by itself)."""
    runs: dict[str, int] = {}
    for r in results:
        for rt, n in r.runs:
            runs[rt] = runs.get(rt, 0) + n
    sums = episode_counters(results).sum(axis=0)
    return CostCounts(
        episodes=len(results),
        stored_edges=stored_edges,
        runs=runs,
        realized=float(sum(r.value for r in results)),
        **{name: int(v) for name, v in zip(COUNTERS, sums, strict=True)},
    )


def replay(
    structure: Structure,
    env: AnyEnvironment,
    tasks: Sequence[Task],
    *,
    skill_versions: Mapping[str, str] | None = None,
    index_version: str | None = None,
) -> Evaluation:
    """Run every task under `structure` (its pins unless versions are given)."""
    if isinstance(env, BatchEnvironment):
        done, refused = env.replay_batch(
            structure, tasks, skill_versions=skill_versions, index_version=index_version
        )
        return Evaluation(
            structure.structure_id, structure.fingerprint(), done, count(structure, done), refused
        )
    log = RefusalLog()
    runtime = Runtime(
        structure, env, skill_versions=skill_versions, index_version=index_version, log=log
    )
    results = tuple(runtime.run(t) for t in tasks)
    return Evaluation(
        structure.structure_id,
        structure.fingerprint(),
        results,
        count(structure, results),
        tuple(log.items),
    )
