"""The scheduled structure search: freeze, search, controls, final test, store, register.

Composition only: each step is one task over one `adapters.structures_service` stage,
and whether a winner is registered is decided in the core (`SearchResult.improved`),
not here. The flow publishes the archive and the final test as table artifacts.
"""

from __future__ import annotations

from typing import Any

from prefect import flow

from adapters.structures_service import Targets, summary
from flows.artifacts import table_artifact
from reflexmem.settings import Settings
from tasks.structures import activate, controls_and_test, prepare, register, search, store

STRUCTURE_SEARCH_CRON = "30 3 * * *"


@flow(name="structure_search")
def structure_search(
    database_url: str | None = None,
    tracking_uri: str | None = None,
    artifact_location: str | None = None,
    environment: str = "composite",
    seed: int = 0,
    cost_model: str = "experiment-b",
    scope: str = "office",
) -> dict[str, Any]:
    """Search from the scope's active structure and register the winner if it improved."""
    settings = Settings()
    t = Targets(
        database_url or settings.resolved_database_url,
        tracking_uri or settings.resolved_tracking_uri,
        artifact_location,
        scope,
    )
    prepare(t, environment, seed)
    result = search(t, environment, seed, cost_model)
    controls, rows = controls_and_test(result, environment, seed)
    row = store(t, result, environment, controls, rows)
    version = register(t, row, result, rows, environment, seed)
    bundle = activate(t, row, result)
    out = summary(row, result, rows, mlflow=version, bundle=bundle)
    table_artifact(
        key="structure-archive",
        table=[
            {
                "candidate": e.candidate_id,
                "cost": e.cost,
                "passes_floor": e.passes_floor,
                "edges": ", ".join(e.to_dict()["edges"]) or "-",
                "success": ", ".join(f"{k}={v:.2f}" for k, v in sorted(e.success.items())),
            }
            for e in result.archive.entries
        ],
        description=f"non-dominated archive of search {row['search_id']} ({environment})",
    )
    table_artifact(
        key="structure-final-test",
        table=[
            {
                "name": r["name"],
                "structure": r["structure_id"],
                "solved": r["solved"],
                "tasks": r["tasks"],
                "cost": r["cost"],
            }
            for r in rows
        ],
        description="final test (never used to choose) of the winner, parent and controls",
    )
    return out


if __name__ == "__main__":  # pragma: no cover - deployment entry point
    structure_search.serve(name="structure-search-daily", cron=STRUCTURE_SEARCH_CRON)
