"""The selection loop, one function per stage: freeze, generate, check, score, archive, choose.

1. `freeze`: the parent and its failure and cost records on the generation set.
2. `generate`: proposals from those records (`proposals`), applied by the operators;
   every child goes through the static checks against its parent, refusals are logged.
3. `score`: replay on the selection set (disjoint from the generation set); a
   candidate under any task family's floor is kept out of the choice (not the archive).
4. Single-mutation experiments are kept apart from the combined experiment: the
   improving singles of a beam member are applied together as one more candidate.
5. The archive keeps the non-dominated candidates; the beam (best few that pass every
   floor) seeds the next generation; the loop stops when the best no longer improves,
   after `max_generations` or when `max_evaluations` candidates were scored.
6. `choose`: the cheapest candidate passing every floor (ties: fewer edges, fewer
   grants, fingerprint) whose gain over its base is real (`gain.earns`: beyond noise
   where realized value is priced). The final test set is never read here.

The floor of a family is the parent's success on the generation set minus
`floor_tolerance` (0), and never below `absolute_floor` (0.9: nine tasks in ten): a
child may not do worse than what it replaces on any family, a parent that fails a
family does not lower the bar for its children, and the floors are fixed before any
candidate is scored.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from reflexmem.structures.archive import Archive, ArchiveEntry
from reflexmem.structures.cost import DEFAULT, CostModel
from reflexmem.structures.evaluate import AnyEnvironment, Evaluation, replay
from reflexmem.structures.gain import Base, earns
from reflexmem.structures.model import Structure
from reflexmem.structures.mutations import (
    Mutation,
    MutationRefused,
    Step,
    apply_step,
    checked,
    replay_steps,
)
from reflexmem.structures.office_tasks import TaskSets
from reflexmem.structures.proposals import propose
from reflexmem.structures.refusals import Refusal, RefusalLog, StructureRefused
from reflexmem.structures.runtime import Task


@dataclass(frozen=True)
class SearchConfig:
    """Budget and rules of one search (every value declared, none fitted)."""

    cost_model: CostModel = DEFAULT
    beam: int = 3
    max_generations: int = 6
    max_evaluations: int = 400
    archive_capacity: int = 24
    floor_tolerance: float = 0.0
    default_floor: float = 1.0
    absolute_floor: float = 0.9
    seed: int = 0
    explore_edges: bool = False


@dataclass(frozen=True)
class Frozen:
    """A structure with its records on the generation set (read-only from here on)."""

    structure: Structure
    records: Evaluation

    def summary(self) -> dict[str, Any]:
        """Failures per family and the counted cost inputs."""
        return {
            "structure_id": self.structure.structure_id,
            "success": self.records.success_by_family(),
            "failures": self.records.failures_by_family(),
            "counts": self.records.counts.to_dict(),
        }


@dataclass(frozen=True)
class Candidate:
    """A scored structure: lineage from the search parent and selection-set results."""

    structure: Structure
    lineage: tuple[Step, ...]
    parent_candidate: str | None
    generation: int
    evaluation: Evaluation
    success: dict[str, float] = field(hash=False)
    cost: float
    components: dict[str, float] = field(hash=False)
    below_floor: tuple[str, ...]
    earned: bool = True
    """Beats the candidate it came from beyond noise (`gain.earns`); the parent has."""

    @property
    def passes(self) -> bool:
        """Whether it clears every task family's floor."""
        return not self.below_floor

    @property
    def eligible(self) -> bool:
        """Whether it may be chosen: above every floor, and a real gain over its base."""
        return self.passes and self.earned

    @property
    def operator(self) -> str:
        """Operators of the lineage joined by `+` (`parent` for the parent)."""
        return "+".join(s.operator for s in self.lineage) or "parent"

    def key(self) -> tuple[float, int, int, str]:
        """Choice order: cost, then edges, then grants, then fingerprint."""
        s = self.structure
        grants = sum(len(m.tools) + len(m.effects) + len(m.knowledge) for m in s.modules)
        return (round(self.cost, 9), len(s.edges), grants, s.fingerprint())

    def entry(self) -> ArchiveEntry:
        """Its archive entry."""
        return ArchiveEntry(
            self.structure.structure_id,
            self.structure,
            self.success,
            self.cost,
            self.passes,
            self.generation,
            self.parent_candidate,
            tuple(s.to_dict() for s in self.lineage),
        )


@dataclass
class SearchStats:
    """What the search did and spent."""

    generations: int = 0
    generated: int = 0
    refused: int = 0
    evaluated: int = 0
    selection_replays: int = 0
    generation_replays: int = 0
    episodes: int = 0
    search_spend: float = 0.0
    wall_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """Plain form; evaluations per candidate counts both kinds of replay."""
        per = (self.selection_replays + self.generation_replays) / max(self.evaluated, 1)
        return {**self.__dict__, "evaluations_per_candidate": per}


@dataclass(frozen=True)
class SearchResult:
    """Everything a search produced; the final test is run separately on the winner."""

    parent: Frozen
    floors: dict[str, float]
    parent_candidate: Candidate
    winner: Candidate
    archive: Archive
    refusals: tuple[Refusal, ...]
    stats: SearchStats
    history: tuple[dict[str, Any], ...]
    config: SearchConfig
    candidates: dict[str, Candidate] = field(hash=False)

    @property
    def amortised_search(self) -> float:
        """The search's spend spread over the selection episodes (cost units)."""
        model = self.config.cost_model
        if model.search_horizon <= 0:
            return 0.0
        n = self.winner.evaluation.counts.episodes
        return self.stats.search_spend * n / model.search_horizon

    @property
    def improved(self) -> bool:
        """The winner differs from the parent and beats it even after paying for the search."""
        w, p = self.winner, self.parent_candidate
        same = w.structure.fingerprint() == p.structure.fingerprint()
        return not same and w.cost + self.amortised_search < p.cost


def freeze(structure: Structure, env: AnyEnvironment, tasks: Sequence[Task]) -> Frozen:
    """Stage 1: replay the parent on the generation set and freeze the records."""
    return Frozen(structure, replay(structure, env, tasks))


def quality_floors(
    frozen: Frozen, families: Sequence[str], config: SearchConfig
) -> dict[str, float]:
    """Per family: the parent's generation-set success minus the tolerance.

    Never below the absolute floor, so a parent that fails a family does not excuse
    its children.
    """
    rates = frozen.records.success_by_family()
    return {
        f: max(config.absolute_floor, rates.get(f, config.default_floor) - config.floor_tolerance)
        for f in families
    }


def _resolver(other: Structure | None) -> Callable[[str], Structure]:
    def resolve(structure_id: str) -> Structure:
        if other is None or other.structure_id != structure_id:
            raise MutationRefused("recombine", "other", f"{structure_id!r} is not at hand")
        return other

    return resolve


def generate(
    frozen: Frozen,
    others: Sequence[Frozen],
    log: RefusalLog,
    stats: SearchStats | None = None,
    *,
    explore_edges: bool = False,
) -> list[Mutation]:
    """Stage 2: proposals -> operators -> static checks; refusals go to `log`."""
    pairs = [(o.structure, o.records) for o in others]
    out: list[Mutation] = []
    for p in propose(frozen.structure, frozen.records, pairs, explore_edges=explore_edges):
        if stats is not None:
            stats.generated += 1
        step = Step(p.operator, p.args)
        try:
            out.append(checked(apply_step(frozen.structure, step, _resolver(p.other))))
        except MutationRefused as exc:
            log.add(exc.refusal)
        except StructureRefused as exc:
            log.extend(exc.refusals)
        else:
            continue
        if stats is not None:
            stats.refused += 1
    return out


def score(
    structure: Structure,
    lineage: tuple[Step, ...],
    parent_candidate: str | None,
    generation: int,
    env: AnyEnvironment,
    tasks: Sequence[Task],
    config: SearchConfig,
    floors: dict[str, float],
    stats: SearchStats | None = None,
    base: Base | None = None,
) -> Candidate:
    """Stage 3: replay on the selection set, price it, compare with the floors.

    `base`: the candidate it came from, whose gain it must beat (`gain.earns`).
    """
    ev = replay(structure, env, tasks)
    success = ev.success_by_family()
    cost = ev.cost(config.cost_model)
    parts = ev.components(config.cost_model)
    if stats is not None:
        stats.selection_replays += 1
        stats.evaluated += 1
        stats.episodes += len(tasks)
        # What replaying costs: a replayed decision realizes no return, so the outcome
        # credit (trading) is not search spend, or a losing period would look expensive.
        stats.search_spend += cost - parts.get("outcome", 0.0)
    below = tuple(f for f, floor in sorted(floors.items()) if success.get(f, 0.0) < floor)
    return Candidate(
        structure,
        lineage,
        parent_candidate,
        generation,
        ev,
        success,
        cost,
        parts,
        below,
        base is None or earns(config.cost_model, ev, base),
    )


def combine(base: Structure, singles: Sequence[Candidate]) -> Mutation | None:
    """Stage 4: apply the improving single steps together (those that still apply)."""
    steps: list[Step] = []
    current = base
    for c in singles:
        step = c.lineage[-1]
        try:
            current = apply_step(current, step).child
        except MutationRefused:
            continue
        steps.append(step)
    if len(steps) < 2:
        return None
    try:
        return checked(replay_steps(base, steps))
    except (MutationRefused, StructureRefused):
        return None


def choose(candidates: Sequence[Candidate]) -> Candidate | None:
    """Stage 6: the best eligible candidate (floors passed, gain earned), if any."""
    passing = [c for c in candidates if c.eligible]
    return min(passing, key=Candidate.key) if passing else None


def run_search(
    parent: Structure, env: AnyEnvironment, sets: TaskSets, config: SearchConfig | None = None
) -> SearchResult:
    """All stages from a parent structure to a chosen winner and an archive."""
    config = config or SearchConfig()
    start = time.perf_counter()
    stats, log = SearchStats(), RefusalLog()
    root = freeze(parent, env, sets.generation)
    stats.generation_replays += 1
    floors = quality_floors(root, sets.families(), config)
    first = score(parent, (), None, 0, env, sets.selection, config, floors, stats)
    cache: dict[str, Candidate] = {parent.fingerprint(): first}
    frozen: dict[str, Frozen] = {parent.fingerprint(): root}
    archive = Archive(sets.families(), config.archive_capacity).add([first.entry()])
    beam, history = [first], []
    for gen in range(1, config.max_generations + 1):
        stats.generations = gen
        for c in beam:
            if c.structure.fingerprint() not in frozen:
                frozen[c.structure.fingerprint()] = freeze(c.structure, env, sets.generation)
                stats.generation_replays += 1
        members = [frozen[c.structure.fingerprint()] for c in beam]
        new: list[Candidate] = []
        for c, fz in zip(beam, members, strict=True):
            singles: list[Candidate] = []
            tried = list(generate(fz, members, log, stats, explore_edges=config.explore_edges))
            # Every child and the combination are tested against c (Bonferroni count).
            base = Base.of(config.cost_model, c.evaluation, tries=len(tried) + 1)
            for m in tried:
                fp = m.child.fingerprint()
                if fp in cache or stats.evaluated >= config.max_evaluations:
                    continue
                lineage = (*c.lineage, *m.steps)
                sid = c.structure.structure_id
                cand = score(
                    m.child, lineage, sid, gen, env, sets.selection, config, floors, stats,
                    base,
                )  # fmt: skip
                cache[fp] = cand
                new.append(cand)
                if cand.eligible and cand.key() < c.key() and len(m.steps) == 1:
                    singles.append(cand)
            combo = combine(c.structure, sorted(singles, key=Candidate.key))
            if (
                combo is not None
                and combo.child.fingerprint() not in cache
                and stats.evaluated < config.max_evaluations
            ):
                lineage = (*c.lineage, *combo.steps)
                sid = c.structure.structure_id
                cand = score(
                    combo.child, lineage, sid, gen, env, sets.selection, config, floors, stats,
                    base,
                )  # fmt: skip
                cache[cand.structure.fingerprint()] = cand
                new.append(cand)
        archive = archive.add([c.entry() for c in new])
        pool = {c.structure.fingerprint(): c for c in [*beam, *new] if c.eligible}
        ranked = sorted(pool.values(), key=Candidate.key)
        best_before = min(beam, key=Candidate.key)
        history.append(
            {
                "generation": gen,
                "new_candidates": len(new),
                "best": ranked[0].structure.structure_id if ranked else None,
                "best_cost": ranked[0].cost if ranked else None,
                "best_operator": ranked[0].operator if ranked else None,
            }
        )
        if not ranked or ranked[0].key() >= best_before.key():
            break
        beam = ranked[: config.beam]
    winner = choose(list(cache.values())) or first
    stats.wall_s = time.perf_counter() - start
    return SearchResult(
        root,
        floors,
        first,
        winner,
        archive,
        tuple(log.items),
        stats,
        tuple(history),
        config,
        {c.structure.structure_id: c for c in cache.values()},
    )
