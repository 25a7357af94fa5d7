"""The structure search as stages over URLs: prepare, search, test, persist, register, activate.

Each stage is a plain function of strings and core values, so the Prefect tasks wrap
them one to one and the CLI's direct mode and the demo call the same functions in the
same order (`run_all`). The office environment is rebuilt from (environment, seed) in
each stage that needs it: its task generator is deterministic, so every stage sees the
same tasks, inputs and ground truth without passing the environment around.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from adapters.db import make_engine
from adapters.tracking.structures import StructureRegistry, register_stored
from reflexmem.structures import operations as ops
from reflexmem.structures import persist, rollout
from reflexmem.structures.controls import Controls, final_test, run_controls
from reflexmem.structures.cost import MODELS
from reflexmem.structures.evaluate import replay
from reflexmem.structures.experiment_b import candidates
from reflexmem.structures.office_tasks import office_setup
from reflexmem.structures.report import dataset_rows, evaluation_data, metrics
from reflexmem.structures.search import SearchConfig, SearchResult, rebuild_winner, run_search


@dataclass(frozen=True)
class Targets:
    """Where the ledger and the MLflow store are, and which scope's bundle is searched."""

    database_url: str
    tracking_uri: str
    artifact_location: str | None = None
    scope: str = ops.DEFAULT_SCOPE

    def registry(self) -> StructureRegistry:
        """The MLflow structure registry on these targets."""
        return StructureRegistry(self.tracking_uri, self.artifact_location)


def prepare(t: Targets, environment: str, seed: int) -> str:
    """Make sure the scope has an active structure (all-shared the first time); its ID."""
    env, sets = office_setup(environment, seed)
    engine = make_engine(t.database_url)
    try:
        root = candidates()["all_shared"]
        parent = ops.ensure_root(engine, t.scope, root, replay(root, env, sets.selection))
        with engine.connect() as conn:
            stored = persist.get_version(conn, parent.structure_id)
        if stored is not None and stored.mlflow_version is None:
            register_stored(engine, t.registry(), parent.structure_id, families=sets.families())
        return parent.structure_id
    finally:
        engine.dispose()


def search(t: Targets, environment: str, seed: int, cost_model: str) -> SearchResult:
    """Freeze the active structure and run the selection loop from it."""
    env, sets = office_setup(environment, seed)
    engine = make_engine(t.database_url)
    try:
        found = rollout.active(engine, t.scope)
    finally:
        engine.dispose()
    if found is None:
        raise KeyError(f"scope {t.scope!r} has no active structure; run prepare first")
    config = SearchConfig(cost_model=MODELS[cost_model], seed=seed)
    return run_search(found[1], env, sets, config)


def controls_and_test(
    result: SearchResult, environment: str, seed: int
) -> tuple[Controls, list[dict[str, Any]]]:
    """The two controls, then the final test of the version the selection chose."""
    env, sets = office_setup(environment, seed)
    winner = rebuild_winner(result).child if result.improved else result.winner.structure
    controls = run_controls(result, env, sets)
    return controls, final_test(result, controls, env, sets, winner)


def store(
    t: Targets,
    result: SearchResult,
    environment: str,
    controls: Controls,
    rows: list[dict[str, Any]],
) -> dict[str, Any]:
    """Persist the search, its archive and (if it improved) the winner version."""
    winner = rebuild_winner(result) if result.improved else None
    engine = make_engine(t.database_url)
    try:
        return ops.persist_search(
            engine,
            result,
            environment=environment,
            winner=winner,
            controls=controls,
            final_test=rows,
        )
    finally:
        engine.dispose()


def register(
    t: Targets,
    row: dict[str, Any],
    result: SearchResult,
    rows: list[dict[str, Any]],
    environment: str,
    seed: int,
) -> dict[str, Any] | None:
    """Register the new version in MLflow (aliases `current-<family>`, `current`)."""
    if not row["registered"]:
        return None
    _, sets = office_setup(environment, seed)
    engine = make_engine(t.database_url)
    try:
        reg = register_stored(
            engine,
            t.registry(),
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
    finally:
        engine.dispose()
    return {
        "model": reg.model,
        "version": reg.version,
        "run_id": reg.run_id,
        "aliases": reg.aliases,
    }


def activate(t: Targets, row: dict[str, Any], result: SearchResult) -> str | None:
    """Make the registered winner the scope's active bundle; its bundle ID."""
    if not row["registered"]:
        return None
    engine = make_engine(t.database_url)
    try:
        bundle = rollout.activate(engine, t.scope, row["winner_id"], result.winner.evaluation)
    finally:
        engine.dispose()
    return bundle.bundle_id


def summary(
    row: dict[str, Any], result: SearchResult, rows: list[dict[str, Any]], **extra: Any
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


def run_all(
    t: Targets, environment: str = "composite", seed: int = 0, cost_model: str = "experiment-b"
) -> dict[str, Any]:
    """Every stage in order, without Prefect (the flow runs the same stages as tasks)."""
    prepare(t, environment, seed)
    result = search(t, environment, seed, cost_model)
    controls, rows = controls_and_test(result, environment, seed)
    row = store(t, result, environment, controls, rows)
    version = register(t, row, result, rows, environment, seed)
    bundle = activate(t, row, result)
    return summary(row, result, rows, mlflow=version, bundle=bundle)


def show(t: Targets) -> dict[str, Any]:
    """The current structure, its parent chain and the archive of the newest search."""
    engine = make_engine(t.database_url)
    try:
        found = rollout.active(engine, t.scope)
        with engine.connect() as conn:
            chain = persist.lineage(conn, found[1].structure_id) if found else []
            latest = persist.latest_search(conn)
            archive = persist.archive_of(conn, latest["search_id"]) if latest else []
            stored = persist.get_version(conn, found[1].structure_id) if found else None
    finally:
        engine.dispose()
    return {
        "scope": t.scope,
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
