"""The scheduled structure search: prepare, search, controls and final test, store, register.

Composition only: the flow hands a `PrefectRunner` to the sequence written once in
`reflexmem.operations.structures` (`run_structure_search`), so every stage is the task
wrapping one operation and the CLI's direct mode and the demo run the same sequence.
Whether a winner is registered is decided in the core (`SearchResult.improved`), not
here. The flow publishes the archive and the final test as table artifacts.
"""

from __future__ import annotations

from typing import Any

from prefect import flow

from flows.artifacts import table_artifact
from flows.cycle import SCHEDULED
from flows.settings import flow_settings
from reflexmem.operations.structures import SearchParams, run_structure_search
from tasks.runner import PrefectRunner

STRUCTURE_SEARCH_CRON = "30 3 * * *"


@flow(name="structure_search", **SCHEDULED)
def structure_search(
    database_url: str | None = None,
    tracking_uri: str | None = None,
    home: str | None = None,
    environment: str = "composite",
    seed: int = 0,
    cost_model: str | None = None,
    scope: str | None = None,
) -> dict[str, Any]:
    """Search from the scope's active structure and register the winner if it improved."""
    settings = flow_settings(database_url, tracking_uri, home)
    params = SearchParams(environment=environment, seed=seed, cost_model=cost_model, scope=scope)
    found = run_structure_search(PrefectRunner(settings), params)
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
            for e in found.result.archive.entries
        ],
        description=(
            f"non-dominated archive of search {found.summary['search_id']} ({environment})"
        ),
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
            for r in found.final_test
        ],
        description="final test (never used to choose) of the winner, parent and controls",
    )
    return found.summary


if __name__ == "__main__":  # pragma: no cover - deployment entry point
    structure_search.serve(name="structure-search-daily", cron=STRUCTURE_SEARCH_CRON)
