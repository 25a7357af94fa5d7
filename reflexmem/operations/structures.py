"""Structure search as stages: prepare, search, test, store, register, activate.

Each stage is an operation like every other (`op(resources, **params) -> report`): it
works on the resources' ledger engine (so an unmigrated ledger is refused before any
stage runs) and registers versions through the resources' `structure_tracker` (MLflow in
`adapters/`). `run_structure_search` writes the sequence once against a `StageRunner`:
the `structure_search` flow runs it with the Prefect runner (one task per stage), the
CLI and the demo with the direct runner. The office environment is rebuilt from
(environment, seed) in each stage that needs it: its task generator is deterministic,
so every stage sees the same tasks, inputs and ground truth without passing it around.
Whether a winner is registered is decided in the core (`SearchResult.improved`).
A version is stamped valid from the cycle's clock (the newest bar, `skills.clock`), so
lineage `--as-of` sees it from the market time at which it was made (docs/lineage.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from reflexmem.operations.resources import Resources
from reflexmem.operations.runner import StageRunner
from reflexmem.operations.skills import clock
from reflexmem.structures import operations as ops
from reflexmem.structures import persist, rollout
from reflexmem.structures.controls import Controls, final_test, run_controls
from reflexmem.structures.cost import MODELS
from reflexmem.structures.evaluate import AnyEnvironment, Evaluation, replay
from reflexmem.structures.experiment_b import candidates
from reflexmem.structures.model import Structure
from reflexmem.structures.office_tasks import TaskSets, office_setup
from reflexmem.structures.report import dataset_rows, evaluation_data, metrics
from reflexmem.structures.search import SearchConfig, SearchResult, run_search
from reflexmem.structures.trading_drift import win_baseline
from reflexmem.structures.trading_ledger import trading_setup
from reflexmem.structures.trading_search import edge_evidence, verdict
from reflexmem.structures.winner import chosen, rebuild_winner

FinalTest = list[dict[str, Any]]
TRADING = "trading"
"""The environment of the user's own roles (`structures.trading`); the others are
experiment B's office environments."""


def _setup_with_root(
    res: Resources, environment: str, seed: int
) -> tuple[AnyEnvironment, TaskSets, Structure]:
    """The environment, its task sets and the root a scope starts from.

    From the ledger for trading (the roles isolated), else from the seed (experiment
    B's all-shared structure).
    """
    if environment == TRADING:
        with res.engine.connect() as conn:
            return trading_setup(conn, res.registry)
    env, sets = office_setup(environment, seed)
    return env, sets, candidates()["all_shared"]


def _setup(res: Resources, environment: str, seed: int) -> tuple[AnyEnvironment, TaskSets]:
    """The environment and its task sets."""
    env, sets, _ = _setup_with_root(res, environment, seed)
    return env, sets


@dataclass(frozen=True)
class SearchParams:
    """What one structure search is asked to do."""

    environment: str = "composite"
    seed: int = 0
    cost_model: str | None = None
    scope: str | None = None

    @property
    def model(self) -> str:
        """The cost model: as given, else `trading` for trading and `experiment-b` otherwise."""
        return self.cost_model or (TRADING if self.environment == TRADING else "experiment-b")

    @property
    def bundle_scope(self) -> str:
        """The bundle scope: as given, else the environment's (`trading` or `office`)."""
        return self.scope or (TRADING if self.environment == TRADING else ops.DEFAULT_SCOPE)


@dataclass(frozen=True)
class StructureSearch:
    """A finished search: the core's result, the final test and what the stages did."""

    result: SearchResult
    final_test: FinalTest
    summary: dict[str, Any]


def prepare_structures(res: Resources, environment: str, seed: int, scope: str) -> str:
    """Make sure the scope has an active structure; its ID.

    The first time: experiment B's all-shared structure, or for trading the roles
    isolated (today's behaviour).
    """
    env, sets, root = _setup_with_root(res, environment, seed)
    counts = drift_baseline(environment, replay(root, env, sets.selection))
    parent = ops.ensure_root(res.engine, scope, root, valid_at=clock(res, None), counts=counts)
    with res.engine.connect() as conn:
        stored = persist.get_version(conn, parent.structure_id)
    if stored is not None and stored.mlflow_version is None:
        res.structure_tracker.register(res.engine, parent.structure_id, families=sets.families())
    return parent.structure_id


def search_structures(
    res: Resources, environment: str, seed: int, cost_model: str, scope: str
) -> SearchResult:
    """Freeze the active structure and run the selection loop from it."""
    env, sets = _setup(res, environment, seed)
    found = rollout.active(res.engine, scope)
    if found is None:
        raise KeyError(f"scope {scope!r} has no active structure; run prepare first")
    config = SearchConfig(
        cost_model=MODELS[cost_model], seed=seed, explore_edges=environment == TRADING
    )
    return run_search(found[1], env, sets, config)


def control_and_test(
    res: Resources, result: SearchResult, environment: str, seed: int
) -> tuple[Controls, FinalTest]:
    """The two controls, then the final test of the version the selection chose."""
    env, sets = _setup(res, environment, seed)
    winner = chosen(result)
    controls = run_controls(result, env, sets)
    return controls, final_test(result, controls, env, sets, winner)


def weigh_edges(
    res: Resources, result: SearchResult, environment: str, seed: int
) -> dict[str, Any] | None:
    """Trading only: whether each edge of the chosen structure earns its place.

    On the final-test decisions, with an interval (`trading_search.edge_evidence`).
    """
    if environment != TRADING:
        return None
    with res.engine.connect() as conn:
        env, sets, _ = trading_setup(conn, res.registry)
    winner = chosen(result)
    rows = edge_evidence(winner, env, sets.test, result.config.cost_model)
    return {"edges": rows, "verdict": verdict(rows), "final_test_decisions": len(sets.test)}


def store_search(
    res: Resources,
    result: SearchResult,
    environment: str,
    controls: Controls,
    rows: FinalTest,
) -> dict[str, Any]:
    """Persist the search, its archive and (if it improved) the winner version."""
    winner = rebuild_winner(result) if result.improved else None
    return ops.persist_search(
        res.engine,
        result,
        environment=environment,
        winner=winner,
        controls=controls,
        final_test=rows,
        valid_at=clock(res, None),
    )


def register_winner(
    res: Resources,
    row: dict[str, Any],
    result: SearchResult,
    rows: FinalTest,
    environment: str,
    seed: int,
) -> dict[str, Any] | None:
    """Register the new version (aliases `current-<family>`, `current`); where it went."""
    if not row["registered"]:
        return None
    _, sets = _setup(res, environment, seed)
    reg = res.structure_tracker.register(
        res.engine,
        row["winner_id"],
        families=sets.families(),
        evaluation=evaluation_data(result, rows),
        metrics=metrics(result, rows),
        datasets={
            "generation": dataset_rows(sets.generation),
            "selection": dataset_rows(sets.selection),
            "final_test": dataset_rows(sets.test),
        },
        archive=[e.to_dict() for e in result.archive.entries],
        search_id=row["search_id"],
    )
    return None if reg is None else dict(reg)


def drift_baseline(environment: str, ev: Evaluation) -> dict[str, list[int]]:
    """What a bundle's drift test holds it to, per family.

    For trading the wins of the decisions that proceeded (`trading_drift`), otherwise
    the tasks solved.
    """
    return win_baseline(ev) if environment == TRADING else rollout.baseline_of(ev)


def activate_winner(
    res: Resources, row: dict[str, Any], result: SearchResult, scope: str, environment: str
) -> str | None:
    """Make the registered winner the scope's active bundle; its bundle ID."""
    if not row["registered"]:
        return None
    counts = drift_baseline(environment, result.winner.evaluation)
    bundle = rollout.activate(res.engine, scope, row["winner_id"], counts=counts)
    return bundle.bundle_id


def summary(
    row: dict[str, Any], result: SearchResult, rows: FinalTest, **extra: Any
) -> dict[str, Any]:
    """What a search did, for the CLI, the flow artifact and the demo."""
    return {
        "search_id": row["search_id"],
        "parent": result.parent.structure.structure_id,
        "winner": result.winner.structure.structure_id,
        "registered": row["registered"],
        "registered_id": row["winner_id"],
        "operator": result.winner.operator,
        "steps": [str(s) for s in result.winner.lineage],
        "selection_cost": result.winner.cost,
        "parent_selection_cost": result.parent_candidate.cost,
        "stats": result.stats.to_dict(),
        "archive_size": len(result.archive),
        "final_test": rows,
        **extra,
    }


def run_structure_search(
    runner: StageRunner, params: SearchParams | None = None
) -> StructureSearch:
    """Every stage in order, through `runner`: what the `structure_search` flow runs."""
    p = params or SearchParams()
    scope = p.bundle_scope
    runner.run(prepare_structures, environment=p.environment, seed=p.seed, scope=scope)
    result = runner.run(
        search_structures,
        environment=p.environment,
        seed=p.seed,
        cost_model=p.model,
        scope=scope,
    )
    controls, rows = runner.run(
        control_and_test, result=result, environment=p.environment, seed=p.seed
    )
    edges = runner.run(weigh_edges, result=result, environment=p.environment, seed=p.seed)
    row = runner.run(
        store_search, result=result, environment=p.environment, controls=controls, rows=rows
    )
    version = runner.run(
        register_winner, row=row, result=result, rows=rows, environment=p.environment, seed=p.seed
    )
    bundle = runner.run(
        activate_winner, row=row, result=result, scope=scope, environment=p.environment
    )
    extra = {"mlflow": version, "bundle": bundle, "environment": p.environment, "scope": scope}
    if edges is not None:
        extra["edge_evidence"] = edges
    return StructureSearch(result, rows, summary(row, result, rows, **extra))


def show_structures(res: Resources, scope: str = ops.DEFAULT_SCOPE) -> dict[str, Any]:
    """The current structure, its parent chain and the archive of the newest search."""
    found = rollout.active(res.engine, scope)
    with res.engine.connect() as conn:
        chain = persist.lineage(conn, found[1].structure_id) if found else []
        latest = persist.latest_search(conn)
        archive = persist.archive_of(conn, latest["search_id"]) if latest else []
        stored = persist.get_version(conn, found[1].structure_id) if found else None
    return {
        "scope": scope,
        "bundle": found[0].to_dict() if found else None,
        "current": None if found is None else found[1].structure_id,
        "edges": [] if found is None else sorted(f"{e.id}[{e.trigger}]" for e in found[1].edges),
        "mlflow_version": None if stored is None else stored.mlflow_version,
        "lineage": chain,
        "archive": [
            {
                "candidate_id": a["candidate_id"],
                "success": a["success"],
                "cost": a["cost"],
                "passes_floor": a["passes_floor"],
                "generation": a["generation"],
                "parent_candidate": a["parent_candidate"],
            }
            for a in archive
        ],
    }
