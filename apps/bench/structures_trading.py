"""`reflexmem bench structures --trading`: the trading structure search beside its floor.

Why a module of its own: the office benchmark (`apps.bench.structures`) measures the
loop on experiment B and a synthetic structure; the trading environment is the one a
user's agents live in, with its own cost model (realized returns in basis points), its
own root (the roles isolated), time-ordered sets and edge evidence. This module runs, in
memory and without a ledger, the same core calls the production stages make
(`operations.structures`: `run_search` with the trading cost model and `explore_edges`,
`run_controls`, `final_test` on the version the selection chose, `edge_evidence`), on a
synthetic stream with one planted cross-role effect (`apps.bench.structures_stream`).

The floor is the plain way to do the search's job from the isolated root: evaluate every
single-edge change (each ordered pair of role modules, an edge lending `checks`, built
by the search's own proposal and operator code and static checks) on the selection set
with the search's own scoring, and keep the best. Per candidate, the search should cost
at most `RATIO_TARGET` times what the floor pays; and it should find the floor's best
edge. Setup (stream, generated checks, their masks) is timed apart from both.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from apps.bench.structures_stream import (
    Planted,
    avoid_check,
    bench_roles,
    environment,
    role_checks,
)
from reflexmem.registry import load_registry
from reflexmem.structures.controls import Controls, final_test, run_controls
from reflexmem.structures.cost import MODELS, CostModel
from reflexmem.structures.evaluate import replay
from reflexmem.structures.gain import net_values
from reflexmem.structures.model import Structure
from reflexmem.structures.mutations import MutationRefused, Step, apply_step, checked
from reflexmem.structures.office_tasks import TaskSets
from reflexmem.structures.proposals import propose
from reflexmem.structures.refusals import StructureRefused
from reflexmem.structures.search import (
    Candidate,
    SearchConfig,
    SearchResult,
    choose,
    run_search,
    score,
)
from reflexmem.structures.trading import SHARED_FIELD, TradingEnvironment
from reflexmem.structures.trading_search import (
    edge_evidence,
    isolated_root,
    pinned_checks,
    time_sets,
    verdict,
)
from reflexmem.structures.winner import chosen

DECISIONS = (1000, 10_000)
RATIO_TARGET = 3.0
"""The search may cost at most this many times the floor per evaluated candidate."""
COST_MODEL = "trading"


def _r(x: float, digits: int = 6) -> float:
    return round(float(x), digits)


def setup(
    n: int, seed: int, planted: Planted, k_roles: int = 4
) -> tuple[TradingEnvironment, TaskSets, Structure, dict[str, str]]:
    """The environment, its time-ordered sets, the isolated root and role -> avoided symbol."""
    registry = load_registry()
    roles = bench_roles(registry, k_roles)
    missing = {planted.victim, planted.holder} - set(roles)
    if missing:
        raise ValueError(f"the planted effect names roles not benchmarked: {sorted(missing)}")
    avoids = role_checks(roles, planted)
    checks = [avoid_check(r, s, registry, namespace=f"role:{r}") for r, s in sorted(avoids.items())]
    env = environment(n, seed, roles=roles, checks=checks, planted=planted)
    sets = time_sets(env)
    root = isolated_root(env.roles_present(), pinned_checks(checks), env.index_version)
    return env, sets, root, avoids


def _floor(
    root: Structure,
    env: TradingEnvironment,
    sets: TaskSets,
    result: SearchResult,
) -> tuple[list[Candidate], int, float]:
    """The floor: every single-edge change from `root` lending `checks`, scored.

    The children come from the search's own code: its exploratory proposals
    (`propose(..., explore_edges=True)`, `add_edge` only), applied by the operator and
    passed through the static checks (`checked`), as `search.generate` does; each is
    scored on the selection set by `search.score` with the search's own floors.
    Returns (candidates, refused, wall seconds).
    """
    cfg = result.config
    start = time.perf_counter()
    proposals = [
        p
        for p in propose(root, result.parent.records, explore_edges=True)
        if p.operator == "add_edge" and SHARED_FIELD in p.args["fields"]
    ]
    scored: list[Candidate] = []
    refused = 0
    for p in proposals:
        try:
            m = checked(apply_step(root, Step(p.operator, p.args)))
        except (MutationRefused, StructureRefused):
            refused += 1
            continue
        scored.append(
            score(m.child, m.steps, root.structure_id, 1, env, sets.selection, cfg, result.floors)
        )
    return scored, refused, time.perf_counter() - start


def _edge_ids(s: Structure) -> list[str]:
    return sorted(e.id for e in s.edges)


def _pairs(s: Structure) -> list[str]:
    """Every ordered pair of modules as an edge ID, sorted."""
    return sorted(f"{a.id}->{b.id}" for a in s.modules for b in s.modules if a != b)


def _rounded(row: dict[str, Any]) -> dict[str, Any]:
    return {k: _r(v) if isinstance(v, float) else v for k, v in row.items()}


def _final(
    rows: Sequence[dict[str, Any]],
    structures: dict[str, Structure],
    env: TradingEnvironment,
    sets: TaskSets,
    model: CostModel,
) -> dict[str, dict[str, Any]]:
    """Per final-test row: its cost, edges and realized / net value per decision."""
    out: dict[str, dict[str, Any]] = {}
    for row in rows:
        ev = replay(structures[row["name"]], env, sets.test)
        n = max(len(ev.results), 1)
        out[row["name"]] = {
            "structure_id": row["structure_id"],
            "edges": row["edges"],
            "tasks": row["tasks"],
            "cost": _r(row["cost"], 4),
            "cost_per_decision": _r(row["cost"] / n, 4),
            "realized_return_per_decision": _r(ev.value / n, 8),
            "net_value_per_decision": _r(float(net_values(model, ev).mean()) if ev.results else 0),
        }
    return out


def bench_trading(n: int, seed: int = 0, planted: Planted | None = None) -> dict[str, Any]:
    """One stream of `n` decisions: setup, search, controls, final test, evidence, floor."""
    planted = planted or Planted()
    model = MODELS[COST_MODEL]
    t0 = time.perf_counter()
    env, sets, root, avoids = setup(n, seed, planted)
    setup_s = time.perf_counter() - t0

    config = SearchConfig(cost_model=model, seed=seed, explore_edges=True)
    result = run_search(root, env, sets, config)
    st = result.stats
    search_s = st.wall_s
    per_search = search_s / max(st.evaluated, 1)

    t1 = time.perf_counter()
    winner = chosen(result)
    controls: Controls = run_controls(result, env, sets)
    rows = final_test(result, controls, env, sets, winner)
    controls_s = time.perf_counter() - t1
    structures = {"winner": winner, "parent": result.parent.structure}
    if controls.random_same_edges is not None:
        structures["control_random_same_edges"] = controls.random_same_edges.structure
    if controls.best_of_n is not None:
        structures["control_best_of_n"] = controls.best_of_n.structure

    t2 = time.perf_counter()
    evidence = edge_evidence(winner, env, sets.test, model)
    evidence_s = time.perf_counter() - t2

    scored, refused, floor_s = _floor(root, env, sets, result)
    best = choose(scored)
    per_floor = floor_s / max(len(scored), 1)
    k = len(root.modules)
    best_edge = None if best is None else _edge_ids(best.structure)
    winner_edges = _edge_ids(winner)
    return {
        "decisions": n,
        "settled": len(sets.generation) + len(sets.selection) + len(sets.test),
        "sets": {
            "generation": len(sets.generation),
            "selection": len(sets.selection),
            "final_test": len(sets.test),
        },
        "roles": [m.id for m in root.modules],
        "checks": {r: f"avoid {s}" for r, s in sorted(avoids.items())},
        "planted": planted.to_dict(),
        "setup_s": _r(setup_s, 4),
        "search": {
            "search_s": _r(search_s, 4),
            "generations": st.generations,
            "candidates_generated": st.generated,
            "candidates_refused": st.refused,
            "candidates_evaluated": st.evaluated,
            "evaluations_per_s": _r(st.evaluated / search_s if search_s > 0 else 0.0, 2),
            "search_s_per_candidate": _r(per_search),
            "replays_per_candidate": _r(st.to_dict()["evaluations_per_candidate"], 4),
            "episodes_replayed": st.episodes,
            "archive_size": len(result.archive),
            "improved": result.improved,
            "amortised_search": _r(result.amortised_search, 4),
            "parent_selection_cost": _r(result.parent_candidate.cost, 4),
            "winner_selection_cost": _r(result.winner.cost, 4),
            "winner_operator": result.winner.operator,
            "winner_edges": winner_edges,
        },
        "controls_and_final_test_s": _r(controls_s, 4),
        "best_of_n_budget": controls.n,
        "final_test": _final(rows, structures, env, sets, model),
        "edge_evidence": {
            "edges": [_rounded(r) for r in evidence],
            "verdict": verdict(evidence),
            "final_test_decisions": len(sets.test),
            "evidence_s": _r(evidence_s, 4),
        },
        "floor": {
            "method": "exhaustive single-edge changes from the isolated root (edge lends checks)",
            "floor_s": _r(floor_s, 4),
            "floor_candidates": len(scored),
            "floor_refused": refused,
            "ordered_role_pairs": k * (k - 1),
            "every_pair_evaluated": _pairs(root)
            == sorted(e for c in scored for e in _edge_ids(c.structure)),
            "floor_s_per_candidate": _r(per_floor),
            "best_edge": best_edge,
            "best_selection_cost": None if best is None else _r(best.cost, 4),
            "best_beats_parent": best is not None and best.key() < result.parent_candidate.key(),
        },
        "ratio_per_candidate": _r(per_search / per_floor if per_floor > 0 else 0.0, 4),
        "ratio_target": RATIO_TARGET,
        "within_target": per_floor > 0 and per_search / per_floor <= RATIO_TARGET,
        "search_found_floor_best": best_edge is not None and set(best_edge) <= set(winner_edges),
        "search_winner_is_floor_best": best_edge == winner_edges,
    }


def run_bench(decisions: Sequence[int] = DECISIONS, seed: int = 0) -> dict[str, Any]:
    """One run per stream size; one JSON object."""
    return {
        "benchmark": "structures_trading",
        "cost_model": COST_MODEL,
        "seed": seed,
        "runs": [bench_trading(n, seed) for n in decisions],
    }
