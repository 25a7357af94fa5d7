"""`reflexmem bench structures`: the selection loop against the plain way to do its job.

Workloads: experiment B (composite and independent environments, from all-shared) and
a synthetic structure of 20 modules (60 unconditional edges, 9 of them needed). For
each, the loop's wall time, candidates generated, refused and evaluated, replays per
candidate, episodes replayed and archive size, beside an honest floor on the same
selection set and cost model:

- experiment B: exhaustive search over every graph on the three modules (each of the 6
  ordered pairs absent, unconditional, or opened on extraction + classification:
  3^6 = 729 structures), which finds the true optimum;
- synthetic: random search with the loop's own evaluation budget (random mutants of
  the parent, one to three random operator steps each); exhaustive search would need
  3^60 structures.
"""

from __future__ import annotations

import itertools
import random
import time
from typing import Any

from reflexmem.structures.checks import static_checks
from reflexmem.structures.controls import random_mutant
from reflexmem.structures.cost import EXPERIMENT_B, MODELS
from reflexmem.structures.experiment_b import candidates, name_of
from reflexmem.structures.model import Contract, Edge, Structure, Trigger
from reflexmem.structures.office_tasks import TaskSets, office_setup
from reflexmem.structures.runtime import Environment
from reflexmem.structures.search import (
    Candidate,
    SearchConfig,
    SearchResult,
    choose,
    freeze,
    quality_floors,
    run_search,
    score,
)
from reflexmem.structures.synthetic import SyntheticEnvironment, parent_structure
from reflexmem.structures.synthetic import task_sets as synthetic_sets

BOTH = Trigger(frozenset({"classify_document", "extract_fields"}))


def _loop(result: SearchResult) -> dict[str, Any]:
    s = result.stats
    return {
        "wall_s": round(s.wall_s, 4),
        "generations": s.generations,
        "candidates_generated": s.generated,
        "candidates_refused": s.refused,
        "candidates_evaluated": s.evaluated,
        "evaluations_per_candidate": round(s.to_dict()["evaluations_per_candidate"], 4),
        "episodes_replayed": s.episodes,
        "archive_size": len(result.archive),
        "parent_cost": result.parent_candidate.cost,
        "winner_cost": result.winner.cost,
        "winner_edges": len(result.winner.structure.edges),
        "winner_operator_steps": len(result.winner.lineage),
    }


def all_graphs(root: Structure) -> list[Structure]:
    """Every graph on the three office modules (3^6), as children of all-shared."""
    ids = [m.id for m in root.modules]
    pairs = [(a, b) for a in ids for b in ids if a != b]
    out = []
    for choice in itertools.product((None, Trigger(), BOTH), repeat=len(pairs)):
        edges, contracts = [], {c.name: c for c in root.contracts}
        for (a, b), trig in zip(pairs, choice, strict=True):
            if trig is None:
                continue
            old = root.edge_map.get(f"{a}->{b}")
            if old is not None:
                edges.append(Edge(a, b, old.contract, old.fields, trig, old.max_messages))
                continue
            outputs = root.module_map[a].outputs
            name = f"pair-{a}-to-{b}-v1"
            contracts[name] = Contract(name, tuple(sorted(outputs)), closed=True)
            edges.append(Edge(a, b, name, tuple(f for f, _ in sorted(outputs)), trig, 2))
        draft = root.evolve(
            edges=tuple(edges), contracts=tuple(contracts.values()), parent_id=root.structure_id
        )
        out.append(draft.evolve(structure_id=f"exhaustive.{draft.fingerprint()[:10]}"))
    return out


def _floor_scores(
    structures: list[Structure],
    env: Environment,
    sets: TaskSets,
    config: SearchConfig,
    floors: dict[str, float],
    root: Structure,
) -> tuple[list[Candidate], int]:
    scored, refused = [], 0
    for s in structures:
        if static_checks(s, [root], source="floor"):
            refused += 1
            continue
        scored.append(score(s, (), root.structure_id, 0, env, sets.selection, config, floors))
    return scored, refused


def bench_experiment_b(environment: str, seed: int = 0) -> dict[str, Any]:
    """The loop from all-shared against exhaustive search, one environment."""
    env, sets = office_setup(environment, seed)
    root = candidates()["all_shared"]
    config = SearchConfig(cost_model=EXPERIMENT_B, seed=seed)
    result = run_search(root, env, sets, config)
    start = time.perf_counter()
    floors = quality_floors(freeze(root, env, sets.generation), sets.families(), config)
    scored, refused = _floor_scores(all_graphs(root), env, sets, config, floors, root)
    best = choose(scored)
    wall = time.perf_counter() - start
    return {
        "workload": f"experiment_b_{environment}",
        "selection_loop": {**_loop(result), "winner": name_of(result.winner.structure)},
        "floor": {
            "method": "exhaustive (3^6 graphs)",
            "wall_s": round(wall, 4),
            "candidates_evaluated": len(scored),
            "candidates_refused": refused,
            "best_cost": None if best is None else best.cost,
            "best": None if best is None else name_of(best.structure),
            "same_graph_as_loop": best is not None
            and best.structure.edge_signature() == result.winner.structure.edge_signature(),
        },
    }


def bench_synthetic(n: int = 20, seed: int = 0, cost_model: str = "experiment-b") -> dict[str, Any]:
    """The loop on the synthetic N-module structure against same-budget random search."""
    env = SyntheticEnvironment(n)
    sets = synthetic_sets(env, seed)
    root = parent_structure(n)
    config = SearchConfig(cost_model=MODELS[cost_model], seed=seed)
    result = run_search(root, env, sets, config)
    rng = random.Random(seed)
    start = time.perf_counter()
    floors = quality_floors(freeze(root, env, sets.generation), sets.families(), config)
    mutants = [random_mutant(root, rng) for _ in range(result.stats.evaluated)]
    scored, refused = _floor_scores(
        [m.child for m in mutants if m is not None], env, sets, config, floors, root
    )
    best = choose(scored)
    wall = time.perf_counter() - start
    return {
        "workload": f"synthetic_{n}_modules",
        "modules": n,
        "parent_edges": len(root.edges),
        "needed_edges": sum(1 for f in sets.families() if f.startswith("c:")),
        "selection_loop": _loop(result),
        "floor": {
            "method": "random search, same number of evaluations",
            "wall_s": round(wall, 4),
            "candidates_evaluated": len(scored),
            "candidates_refused": refused,
            "best_cost": None if best is None else best.cost,
            "passing": sum(c.passes for c in scored),
            "exhaustive_structures": f"3^{len(root.edges)}",
        },
    }


def run_bench(seed: int = 0, modules: int = 20) -> dict[str, Any]:
    """Every workload; one JSON object."""
    return {
        "benchmark": "structures",
        "cost_model": EXPERIMENT_B.name,
        "workloads": [
            bench_experiment_b("composite", seed),
            bench_experiment_b("independent", seed),
            bench_synthetic(modules, seed),
        ],
    }
