"""The structure stages as operations over the ledger; every entry point calls these.

Each takes the engine and opens its own transactions: a refusal is written in a
transaction of its own *before* the error is raised, so the record survives the
failed attempt while nothing else changes (the active structure in particular).
Activation and rollback each run in one transaction: the bundle pointer, the bundle
states and the version lifecycles move together or not at all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa
import yaml

from reflexmem.structures import persist, rollout
from reflexmem.structures.controls import Controls
from reflexmem.structures.evaluate import Evaluation
from reflexmem.structures.model import Lifecycle, Structure
from reflexmem.structures.mutations import Mutation, MutationRefused, Step, apply_step, checked
from reflexmem.structures.refusals import Refusal, RefusalKind, StructureRefused
from reflexmem.structures.schema import parse_structure, schema_refusals
from reflexmem.structures.search import SearchResult

DEFAULT_SCOPE = "office"


def _refuse(engine: sa.Engine, refusals: Sequence[Refusal]) -> StructureRefused:
    with engine.begin() as conn:
        persist.record_events(conn, refusals)
    return StructureRefused(refusals)


def register_root(
    engine: sa.Engine, structure: Structure, valid_at: datetime | None = None
) -> bool:
    """Store a root version (no parent) once; False if it was already there."""
    with engine.begin() as conn:
        if persist.has_version(conn, structure.structure_id):
            return False
        persist.save_version(conn, structure, operator="root", valid_at=valid_at)
        persist.record_events(conn, kind="registered", structure_id=structure.structure_id)
    return True


def ensure_root(
    engine: sa.Engine,
    scope: str,
    root: Structure,
    baseline: Evaluation | None = None,
    valid_at: datetime | None = None,
    counts: Mapping[str, list[int]] | None = None,
) -> Structure:
    """The scope's active structure; the first time, `root` is stored and activated.

    Its drift baseline: `counts`, else `baseline`'s success per family.
    """
    found = rollout.active(engine, scope)
    if found is not None:
        return found[1]
    register_root(engine, root, valid_at)
    rollout.activate(engine, scope, root.structure_id, baseline, counts)
    return root


def admit_file(engine: sa.Engine, path: str | Path) -> Structure:
    """Check a structure file against its declared parent and store it as a candidate.

    Refused (and recorded) when it fails the schema or a static check, names a parent
    the ledger does not hold, or is not a `candidate`.
    """
    p = Path(path)
    source = str(p)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise _refuse(
            engine, [Refusal(RefusalKind.FILE, source, "(file)", "readable", str(exc))]
        ) from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise _refuse(
            engine, [Refusal(RefusalKind.FILE, source, "(document)", "yaml", str(exc))]
        ) from exc
    found = schema_refusals(data, source)
    if found:
        raise _refuse(engine, found)
    parent_id = data.get("parent_id")
    parents: list[Structure] = []
    with engine.connect() as conn:
        stored = persist.get_version(conn, parent_id) if parent_id else None
    if parent_id and stored is None:
        raise _refuse(
            engine,
            [
                Refusal(
                    RefusalKind.FILE,
                    source,
                    "parent_id",
                    "parent",
                    f"parent {parent_id!r} is not a stored version",
                    data.get("structure_id"),
                )
            ],
        )
    if stored is not None:
        parents.append(stored.structure)
    try:
        structure = parse_structure(text, source, parents)
    except StructureRefused as exc:
        raise _refuse(engine, exc.refusals) from exc
    if structure.lifecycle != Lifecycle.CANDIDATE:
        raise _refuse(
            engine,
            [
                Refusal(
                    RefusalKind.FILE,
                    source,
                    "lifecycle",
                    "lifecycle",
                    f"a new structure enters as 'candidate', not {structure.lifecycle.value!r}",
                    structure.structure_id,
                )
            ],
        )
    with engine.begin() as conn:
        persist.save_version(
            conn, structure, operator="file", parents=[p.structure_id for p in parents]
        )
    return structure


def mutate(engine: sa.Engine, structure_id: str, step: Step) -> Mutation:
    """Apply one operator to a stored version; store the child as a candidate.

    A mutation that cannot apply or whose child fails a check (a widening one, say)
    is refused and recorded, and nothing is stored.
    """
    with engine.connect() as conn:
        stored = persist.get_version(conn, structure_id)
    if stored is None:
        raise _refuse(
            engine,
            [
                Refusal(
                    RefusalKind.MUTATION,
                    step.operator,
                    "structure_id",
                    "parent",
                    f"no version {structure_id!r}",
                )
            ],
        )
    try:
        mutation = checked(apply_step(stored.structure, step))
    except MutationRefused as exc:
        raise _refuse(engine, [exc.refusal]) from exc
    except StructureRefused as exc:
        raise _refuse(engine, exc.refusals) from exc
    with engine.begin() as conn:
        if not persist.has_version(conn, mutation.child.structure_id):
            persist.save_version(
                conn,
                mutation.child,
                operator=mutation.operator,
                steps=mutation.steps,
                parents=[p.structure_id for p in mutation.parents],
            )
    return mutation


def persist_search(
    engine: sa.Engine,
    result: SearchResult,
    *,
    environment: str,
    winner: Mutation | None,
    controls: Controls | None = None,
    final_test: list[dict[str, Any]] | None = None,
    valid_at: datetime | None = None,
) -> dict[str, Any]:
    """Store the search, its archive and (if it improved on the parent) the winner.

    `valid_at`: the cycle's clock the winner version is valid from (see `save_version`).
    """
    search_id = persist.new_id("search")
    registered = bool(result.improved and winner is not None)
    ctrl = None
    if controls is not None:
        ctrl = {
            "n": controls.n,
            "random_same_edges": _brief(controls.random_same_edges),
            "best_of_n": _brief(controls.best_of_n),
        }
    row = {
        "search_id": search_id,
        "parent_id": result.parent.structure.structure_id,
        "environment": environment,
        "cost_model": result.config.cost_model.name,
        "winner_fingerprint": result.winner.structure.fingerprint(),
        "winner_id": winner.child.structure_id if registered and winner else None,
        "registered": registered,
        "generations": result.stats.generations,
        "generated": result.stats.generated,
        "refused": result.stats.refused,
        "evaluated": result.stats.evaluated,
        "wall_s": result.stats.wall_s,
        "floors": result.floors,
        "frozen_parent": result.parent.summary(),
        "stats": result.stats.to_dict(),
        "history": list(result.history),
        "controls": ctrl,
        "final_test": final_test,
        "mlflow_run_id": None,
    }
    archive = [
        {
            "candidate_id": e.candidate_id,
            "fingerprint": e.structure.fingerprint(),
            "yaml": e.structure.to_yaml(),
            "success": dict(e.success),
            "cost": e.cost,
            "passes_floor": e.passes_floor,
            "generation": e.generation,
            "parent_candidate": e.parent_candidate,
            "lineage": list(e.lineage),
        }
        for e in result.archive.entries
    ]
    with engine.begin() as conn:
        persist.save_search(conn, row, archive)
        persist.record_events(conn, result.refusals)
        if registered and winner is not None:
            child = winner.child.evolve(lifecycle=Lifecycle.VALIDATING)
            persist.save_version(
                conn,
                child,
                operator=winner.operator,
                steps=winner.steps,
                parents=[p.structure_id for p in winner.parents],
                search_id=search_id,
                valid_at=valid_at,
            )
            persist.record_events(
                conn,
                kind="registered",
                structure_id=child.structure_id,
                detail={"search_id": search_id, "operator": winner.operator},
            )
    return row


def _brief(c: Any) -> dict[str, Any] | None:
    if c is None:
        return None
    return {
        "structure_id": c.structure.structure_id,
        "edges": sorted(f"{e.id}[{e.trigger}]" for e in c.structure.edges),
        "success": c.success,
        "cost": c.cost,
        "passes": c.passes,
        "operator": c.operator,
    }
