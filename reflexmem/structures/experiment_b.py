"""Experiment B (docs/design.md §11), reproduced by running it, and the selection loop on top of it.

The table replays the three packaged candidates (all-shared: three unconditional
edges; isolated: none; conditional: image -> document only when the goal needs both
extraction and classification) on the fixed tasks of each environment and counts what
happened: verified successes, stored edges and areas activated for nothing, the cost
being their sum. The selection is a real search from all-shared with the experiment's
cost model on disjoint generation and selection sets; its winner is then *named* by
comparing its graph with the three candidates, so the name reports what the operators
produced rather than choosing it.
"""

from __future__ import annotations

from typing import Any

from reflexmem.structures.cost import EXPERIMENT_B
from reflexmem.structures.evaluate import replay
from reflexmem.structures.model import Structure
from reflexmem.structures.office import OfficeEnvironment
from reflexmem.structures.office_tasks import ENVIRONMENTS, canonical_tasks, task_sets
from reflexmem.structures.schema import load_packaged
from reflexmem.structures.search import SearchConfig, SearchResult, run_search
from reflexmem.structures.winner import rebuild_winner

CANDIDATES = {
    "all_shared": "office-all-shared",
    "isolated": "office-isolated",
    "conditional": "office-conditional",
}


def candidates() -> dict[str, Structure]:
    """The three packaged candidates, each checked against all-shared."""
    root = load_packaged(CANDIDATES["all_shared"])
    return {
        "all_shared": root,
        "isolated": load_packaged(CANDIDATES["isolated"], [root]),
        "conditional": load_packaged(CANDIDATES["conditional"], [root]),
    }


def name_of(structure: Structure) -> str:
    """Which experiment B candidate has the same graph (edges and triggers), if any."""
    for name, s in candidates().items():
        if s.edge_signature() == structure.edge_signature():
            return name
    return f"other:{structure.structure_id}"


def table() -> list[dict[str, Any]]:
    """One row per environment and candidate, from running the fixed tasks."""
    rows = []
    for environment in ENVIRONMENTS:
        env = OfficeEnvironment()
        tasks = canonical_tasks(env, environment)
        for name, s in candidates().items():
            ev = replay(s, env, tasks)
            rows.append(
                {
                    "environment": environment,
                    "candidate": name,
                    "solved": ev.solved,
                    "tasks": len(tasks),
                    "stored_edges": ev.counts.stored_edges,
                    "unneeded_activations": ev.counts.unneeded_areas,
                    "cost": round(ev.cost(EXPERIMENT_B)),
                    "outcomes": {r.task_id: r.outcome for r in ev.results},
                }
            )
    return rows


def select(environment: str, seed: int = 0) -> tuple[SearchResult, Structure]:
    """The selection loop from all-shared in one environment; its rebuilt winner."""
    env = OfficeEnvironment()
    sets = task_sets(env, environment, seed)
    result = run_search(
        candidates()["all_shared"], env, sets, SearchConfig(cost_model=EXPERIMENT_B, seed=seed)
    )
    return result, rebuild_winner(result).child


def run_experiment_b(seed: int = 0) -> dict[str, Any]:
    """The table, the two selections and how the loop got there."""
    selected: dict[str, str] = {}
    detail: dict[str, Any] = {}
    for environment in ENVIRONMENTS:
        result, winner = select(environment, seed)
        selected[environment] = name_of(winner)
        detail[environment] = {
            "structure_id": winner.structure_id,
            "operators": [str(s) for s in result.winner.lineage],
            "edges": sorted(f"{e.id}[{e.trigger}]" for e in winner.edges),
            "selection_cost": result.winner.cost,
            "parent_selection_cost": result.parent_candidate.cost,
            "floors": result.floors,
            "generations": result.stats.generations,
            "candidates_generated": result.stats.generated,
            "candidates_evaluated": result.stats.evaluated,
            "archive": [e.to_dict()["edges"] for e in result.archive.entries],
        }
    return {
        "rows": table(),
        "selected": selected,
        "selection": detail,
        "cost": "stored edges + unnecessarily activated areas",
    }
