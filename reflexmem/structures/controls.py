"""The two controls beside a winner, and the final test on the version actually chosen.

- random structure with the same number of edges: the winner's modules, its edge count,
  the pairs drawn at random, unconditional, each with a closed contract of its source's
  outputs; redrawn until it passes the static checks against the parent;
- same-budget best-of-N: as many random mutants of the parent (one to three random
  operator steps with random arguments) as the search scored candidates, each scored on
  the selection set, the best one by the search's own rule.

Both are scored on the selection set like any candidate and then run, with the winner
and the parent, on the final test set. Nothing on the test set feeds back into a choice.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from reflexmem.structures.checks import static_checks
from reflexmem.structures.evaluate import AnyEnvironment, Evaluation, replay
from reflexmem.structures.model import Contract, Edge, Structure
from reflexmem.structures.mutations import (
    Mutation,
    MutationRefused,
    Step,
    apply_step,
    checked,
    replay_steps,
)
from reflexmem.structures.office_tasks import TaskSets
from reflexmem.structures.refusals import StructureRefused
from reflexmem.structures.search import Candidate, SearchConfig, SearchResult, choose, score

MAX_DRAWS = 200


def random_same_edges(
    winner: Structure, parent: Structure, k: int, rng: random.Random
) -> Structure | None:
    """A random structure on the winner's modules with `k` unconditional edges."""
    ids = [m.id for m in winner.modules]
    pairs = [(a, b) for a in ids for b in ids if a != b]
    if k > len(pairs):
        return None
    for draw in range(MAX_DRAWS):
        chosen = rng.sample(pairs, k)
        contracts = list(winner.contracts)
        edges = []
        for a, b in chosen:
            outputs = winner.module_map[a].outputs
            if not outputs:
                break
            name = f"random-{a}-to-{b}-v1"
            contracts.append(Contract(name, tuple(sorted(outputs)), closed=True))
            edges.append(Edge(a, b, name, tuple(f for f, _ in sorted(outputs)), max_messages=1))
        else:
            stem = parent.structure_id.split(".", 1)[0]
            draft = winner.evolve(
                edges=tuple(edges), contracts=tuple(contracts), parent_id=parent.structure_id
            )
            child = draft.evolve(structure_id=f"{stem}.random-{draw}-{draft.fingerprint()[:8]}")
            if not static_checks(child, [parent], source="control:random"):
                return child
    return None


def _random_step(s: Structure, rng: random.Random) -> Step:
    subgoals = sorted(s.handler_of)
    ops = ["add_edge", "narrow_scope"] + (["delete_edge", "conditionalize_edge"] if s.edges else [])
    op = rng.choice(ops)
    if op == "delete_edge":
        return Step(op, {"edge": rng.choice(s.edges).id})
    if op == "conditionalize_edge":
        cond = rng.sample(subgoals, rng.randint(1, len(subgoals)))
        return Step(op, {"edge": rng.choice(s.edges).id, "all_of": sorted(cond)})
    if op == "narrow_scope":
        m = rng.choice(s.modules)
        keep = rng.sample(list(m.knowledge), rng.randint(0, len(m.knowledge)))
        return Step(op, {"module": m.id, "knowledge": sorted(keep)})
    a, b = rng.sample([m.id for m in s.modules], 2)
    outputs = dict(s.module_map[a].outputs)
    cond = rng.sample(subgoals, rng.randint(0, len(subgoals)))
    return Step(
        op,
        {
            "source": a,
            "target": b,
            "fields": sorted(outputs),
            "contract": f"random-{a}-to-{b}-v1",
            "all_of": sorted(cond),
            "contract_fields": outputs,
        },
    )


def random_mutant(parent: Structure, rng: random.Random) -> Mutation | None:
    """One to three random steps from `parent`, or None if no draw passes the checks."""
    for _ in range(MAX_DRAWS):
        current, steps = parent, []
        try:
            for _ in range(rng.randint(1, 3)):
                step = _random_step(current, rng)
                current = apply_step(current, step).child
                steps.append(step)
            return checked(replay_steps(parent, steps))
        except (MutationRefused, StructureRefused):
            continue
    return None


@dataclass(frozen=True)
class Controls:
    """The two controls, scored on the selection set."""

    random_same_edges: Candidate | None
    best_of_n: Candidate | None
    n: int


def run_controls(
    result: SearchResult, env: AnyEnvironment, sets: TaskSets, seed: int | None = None
) -> Controls:
    """Both controls for a finished search, with the search's budget and floors."""
    cfg: SearchConfig = result.config
    rng = random.Random(cfg.seed if seed is None else seed)
    parent = result.parent.structure
    winner = result.winner.structure
    rnd = random_same_edges(winner, parent, len(winner.edges), rng)
    rnd_c = (
        score(rnd, (), parent.structure_id, 0, env, sets.selection, cfg, result.floors)
        if rnd is not None
        else None
    )
    n = max(1, result.stats.evaluated)
    scored: list[Candidate] = []
    for _ in range(n):
        m = random_mutant(parent, rng)
        if m is None:
            continue
        scored.append(
            score(m.child, m.steps, parent.structure_id, 0, env, sets.selection, cfg, result.floors)
        )
    best = choose(scored) or (min(scored, key=Candidate.key) if scored else None)
    return Controls(rnd_c, best, n)


def test_row(name: str, structure: Structure, ev: Evaluation, cfg: SearchConfig) -> dict[str, Any]:
    """One row of the final-test report."""
    return {
        "name": name,
        "structure_id": structure.structure_id,
        "edges": sorted(f"{e.id}[{e.trigger}]" for e in structure.edges),
        "solved": ev.solved,
        "tasks": len(ev.results),
        "success": ev.success_by_family(),
        "cost": ev.cost(cfg.cost_model),
    }


def final_test(
    result: SearchResult,
    controls: Controls,
    env: AnyEnvironment,
    sets: TaskSets,
    winner: Structure | None = None,
) -> list[dict[str, Any]]:
    """The chosen winner, the parent and the controls on the final test set.

    The winner is the version the selection actually chose; the test set includes new
    periods, rare types and unseen sub-goal combinations.
    """
    cfg = result.config
    rows: list[tuple[str, Structure]] = [
        ("winner", winner or result.winner.structure),
        ("parent", result.parent.structure),
    ]
    if controls.random_same_edges is not None:
        rows.append(("control_random_same_edges", controls.random_same_edges.structure))
    if controls.best_of_n is not None:
        rows.append(("control_best_of_n", controls.best_of_n.structure))
    out = []
    for name, s in rows:
        ev = replay(s, env, sets.test)
        row = test_row(name, s, ev, cfg)
        tags: dict[str, list[bool]] = {}
        for r, task in zip(ev.results, sets.test, strict=True):
            for tag in task.tags or {"regular"}:
                tags.setdefault(tag, []).append(r.solved)
        row["success_by_tag"] = {k: sum(v) / len(v) for k, v in sorted(tags.items())}
        out.append(row)
    return out


def describe(rows: Sequence[dict[str, Any]]) -> str:
    """A one-line summary of a final-test report."""
    return "; ".join(f"{r['name']} {r['solved']}/{r['tasks']} cost {r['cost']:g}" for r in rows)
