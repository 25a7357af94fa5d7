"""What a registered structure version carries: evaluation data, metrics, datasets.

The MLflow adapter logs exactly this, the ledger stores it with the search, and the
CLI prints it, so the three never disagree on what "the evaluation" of a version was.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from reflexmem.structures.runtime import Task
from reflexmem.structures.search import SearchResult


def _key(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", name)


def evaluation_data(result: SearchResult, final_rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Selection results of winner and parent, floors, final test rows, search stats."""
    w, p = result.winner, result.parent_candidate
    model = result.config.cost_model
    return {
        "cost_model": model.to_dict(),
        "selection": {
            "success": w.success,
            "cost": w.cost,
            "components": w.components,
            "episodes": w.evaluation.counts.episodes,
        },
        "parent_selection": {"success": p.success, "cost": p.cost, "components": p.components},
        "amortised_search": result.amortised_search,
        "floors": result.floors,
        "frozen_parent": result.parent.summary(),
        "final_test": list(final_rows),
        "stats": result.stats.to_dict(),
        "history": list(result.history),
        "lineage": [s.to_dict() for s in w.lineage],
    }


def metrics(result: SearchResult, final_rows: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Flat numeric metrics: selection and test success per family, costs, budget used."""
    out: dict[str, float] = {
        "selection_cost": result.winner.cost,
        "parent_selection_cost": result.parent_candidate.cost,
        "amortised_search": result.amortised_search,
        "candidates_generated": float(result.stats.generated),
        "candidates_evaluated": float(result.stats.evaluated),
        "archive_size": float(len(result.archive)),
        "search_wall_s": result.stats.wall_s,
    }
    out |= {f"selection_success_{_key(f)}": v for f, v in result.winner.success.items()}
    for row in final_rows:
        if row["name"] == "winner":
            out["test_cost"] = float(row["cost"])
            out["test_solved_share"] = row["solved"] / max(row["tasks"], 1)
            out |= {f"test_success_{_key(f)}": v for f, v in row["success"].items()}
    return out


def dataset_rows(tasks: Sequence[Task]) -> list[dict[str, Any]]:
    """One flat row per task (for dataset inputs and Parquet artifacts)."""
    return [
        {
            "task_id": t.task_id,
            "family": t.family,
            "subgoals": ",".join(sorted(t.subgoals)),
            "period": t.period,
            "tags": ",".join(sorted(t.tags)),
        }
        for t in tasks
    ]


def alias_for(family: str) -> str:
    """The MLflow alias naming the current version of a task family."""
    return f"current-{_key(family)}"
