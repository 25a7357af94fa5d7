"""Episode recording with its learning cycle, and a distillation sweep on a schedule.

`record_episodes` is where episodes enter the ledger, so it is also where the learning
cycle runs: bandit credit, distillation of every window the batch closes, evolution
gate. `distillation` sweeps up every closed learning window left undistilled (recorded
with ``distill=False``, or before recording distilled) and distils it (idempotent: a
re-run writes nothing). Both publish a table artifact of what they changed.
"""

from __future__ import annotations

from typing import Any

from prefect import flow
from prefect.artifacts import create_table_artifact

from reflexmem.settings import Settings
from tasks.memory import distill_namespace, namespaces_due
from tasks.memory import record_episodes as record_task

DISTILLATION_CRON = "*/15 * * * *"


@flow(name="distillation")
def distillation(database_url: str | None = None) -> list[dict[str, Any]]:
    """Distil every closed learning window left undistilled; publish what was written."""
    url = database_url or Settings().resolved_database_url
    due = namespaces_due(url)
    rows: list[dict[str, Any]] = []
    for namespace, windows in due.items():
        rows += distill_namespace(url, namespace, windows)
    create_table_artifact(
        key="memory-distillation",
        table=rows
        or [
            {
                "namespace": "-",
                "window": "-",
                "already_done": True,
                "patterns": 0,
                "semantic_written": 0,
                "promoted_candidates": 0,
                "refused": 0,
            }
        ],
        description=f"distilled {len(rows)} window(s) in {len(due)} namespace(s)",
    )
    return rows


@flow(name="record-episodes")
def record_episodes(
    agent_id: str,
    namespace: str,
    episodes: list[dict[str, Any]],
    database_url: str | None = None,
    seed: int = 0,
    distill: bool = True,
) -> dict[str, Any]:
    """Record episodes through the learning cycle; publish the posterior changes."""
    url = database_url or Settings().resolved_database_url
    report = record_task(url, agent_id, namespace, episodes, seed, distill)
    summary = {
        "agent_id": report.agent_id,
        "namespace": report.namespace,
        "first_episode": report.first_episode,
        "episodes": report.episodes,
        "stored": report.stored,
        "refused": len(report.refused),
        "bandit_updates": dict(report.bandit_updates),
        "windows_closed": list(report.windows_closed),
        "windows_distilled": [d.window_key for d in report.distilled],
        "evolved": list(report.evolved),
    }
    create_table_artifact(
        key="memory-episodes",
        table=[{"policy": p, "updates": n} for p, n in sorted(report.bandit_updates.items())]
        or [{"policy": "-", "updates": 0}],
        description=(
            f"{report.episodes} episode(s) for {report.agent_id} in {report.namespace}; "
            f"{report.stored} stored, windows closed: {len(report.windows_closed)} "
            f"(distilled {len(report.distilled)}), "
            f"policies evolved: {len(report.evolved)}"
        ),
    )
    return summary


if __name__ == "__main__":  # pragma: no cover - deployment entry point
    distillation.serve(name="distillation", cron=DISTILLATION_CRON)
