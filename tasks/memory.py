"""Prefect tasks over the ledger-backed memory: one core call each."""

from __future__ import annotations

from typing import Any

from prefect import task

from infra.db import make_engine
from reflexmem.memory.cycle import EpisodeInput
from reflexmem.memory.ledger_agents import MemoryLedger
from reflexmem.memory.ledger_episodes import RecordReport


@task(name="memory-namespaces-due", retries=1, retry_delay_seconds=2)
def namespaces_due(database_url: str) -> dict[str, list[tuple[int, int]]]:
    """Every namespace with at least one completed, undistilled window of ten episodes."""
    engine = make_engine(database_url)
    try:
        return MemoryLedger(engine).namespaces_due()
    finally:
        engine.dispose()


@task(name="memory-distill-namespace", retries=1, retry_delay_seconds=2)
def distill_namespace(
    database_url: str, namespace: str, windows: list[tuple[int, int]]
) -> list[dict[str, Any]]:
    """Distil the given windows of one namespace (idempotent by window key)."""
    engine = make_engine(database_url)
    try:
        bounds = [(int(a), int(b)) for a, b in windows]
        reports = MemoryLedger(engine).store.distill(namespace, bounds)
    finally:
        engine.dispose()
    return [
        {
            "namespace": r.namespace,
            "window": r.window_key,
            "already_done": r.already_done,
            "patterns": len(r.patterns),
            "semantic_written": len(r.written),
            "promoted_candidates": len(r.promoted),
            "refused": len(r.refused),
        }
        for r in reports
    ]


@task(name="memory-record-episodes", retries=0)
def record_episodes(
    database_url: str,
    agent_id: str,
    namespace: str,
    episodes: list[dict[str, Any]],
    seed: int = 0,
    distill: bool = True,
) -> RecordReport:
    """Record settled episodes: ledger rows, episodic memory, credit, distillation, gate.

    ``distill=False`` leaves the windows the batch closes to the distillation flow.
    """
    engine = make_engine(database_url)
    try:
        inputs = [
            EpisodeInput(
                text=str(e["text"]),
                outcome=float(e["outcome"]),
                quality=float(e["quality"]),
                tags=tuple(e.get("tags", ())),
                policy=e.get("policy"),
                source_ids=tuple(e.get("source_ids", ())),
            )
            for e in episodes
        ]
        return MemoryLedger(engine, seed=seed).record_episodes(
            agent_id, namespace, inputs, distill=distill
        )
    finally:
        engine.dispose()
