"""`reflexmem bench episodes`: recording N episodes in the ledger, against two floors.

The sequence is the worst case for the evolution gate: rewards stay low (mean about
0.37 < 0.4), so every gate check fires and the arms grow by one every five windows;
policies are played round-robin over the five defaults, one tag per episode, every
episode above the quality floor. It is recorded in batches of ``batch`` episodes into a
scratch ledger (SQLite file or PostgreSQL database, dropped afterwards) through
`MemoryLedger.record_episodes`, with distillation of every closing window.

Floors, in the same run: ``bulk_rows_s`` writes the same N `episodes` rows and N
episodic `memory_entries` rows with the bulk loader and no rule at all (the fastest
plain way to put the rows there); ``in_process_loop_s`` runs the same episodes through
`LearningLoop` with the policy forced (the same rules, no database).
"""

from __future__ import annotations

import json
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from apps.bench.support import scratch_engine
from reflexmem.ledger.bulk import bulk_insert
from reflexmem.memory.cycle import EpisodeInput
from reflexmem.memory.ledger_agents import MemoryLedger
from reflexmem.memory.loop import LearningLoop
from reflexmem.memory.policies import default_policies
from reflexmem.settings import Settings

NAMESPACE = "bench:episodes"
AGENT = "bench-agent"


def episode_sequence(n: int) -> list[EpisodeInput]:
    """The benchmark's episodes (deterministic; low rewards, round-robin policies)."""
    names = [p.name for p in default_policies()]
    return [
        EpisodeInput(
            f"episode {i} text",
            0.2 if i % 3 == 0 else -0.5,
            0.8,
            tags=(f"t{i % 4}",),
            policy=names[i % len(names)],
        )
        for i in range(n)
    ]


def _bare_frames(episodes: list[EpisodeInput]) -> tuple[pl.DataFrame, pl.DataFrame]:
    n = len(episodes)
    now = pl.Series([datetime.now(UTC)] * n, dtype=pl.Datetime("us", "UTC"))
    rows = pl.DataFrame(
        {
            "episode_id": [f"bare:{i}" for i in range(n)],
            "agent_id": [AGENT] * n,
            "task_family": ["memory"] * n,
            "outcome": [e.outcome for e in episodes],
            "payload": [json.dumps({"episode": i}) for i in range(n)],
            "recorded_at": now,
        }
    )
    entries = pl.DataFrame(
        {
            "entry_id": [f"bare:epi:{i}" for i in range(n)],
            "namespace": ["bare"] * n,
            "tier": ["episodic"] * n,
            "state": ["active"] * n,
            "text": [e.text for e in episodes],
            "tags": [json.dumps(list(e.tags)) for e in episodes],
            "quality": [e.quality for e in episodes],
            "created_episode": list(range(n)),
            "source_ids": ["[]"] * n,
            "source_kind": ["episode"] * n,
            "support": [1] * n,
            "confidence": [1.0] * n,
            "window_key": pl.Series([None] * n, dtype=pl.String),
            "outcome": [e.outcome for e in episodes],
            "created_at": now,
        }
    )
    return rows, entries


def run_bench(
    settings: Settings, *, episodes: int, backend: str, batch: int | None = None
) -> dict[str, Any]:
    """Time the ledger path and both floors on ``episodes`` episodes; the JSON summary."""
    size = episodes if batch is None else batch
    if episodes < 1 or size < 1:
        raise ValueError("episodes and batch must be >= 1")
    seq = episode_sequence(episodes)
    t0 = time.perf_counter()
    loop = LearningLoop(NAMESPACE, rng=None)
    for ep in seq:
        loop.select_policy(name=ep.policy)
        loop.record_episode(ep.text, ep.outcome, ep.quality, ep.tags)
    loop_s = time.perf_counter() - t0
    with (
        tempfile.TemporaryDirectory(prefix="reflex-bench-episodes-") as tmp,
        scratch_engine(settings, backend, Path(tmp)) as engine,
    ):
        ledger = MemoryLedger(engine)
        ledger.ensure_agent(AGENT)
        t0 = time.perf_counter()
        reports = [
            ledger.record_episodes(AGENT, NAMESPACE, seq[i : i + size])
            for i in range(0, episodes, size)
        ]
        ledger_s = time.perf_counter() - t0
        rows, entries = _bare_frames(seq)
        t0 = time.perf_counter()
        with engine.begin() as conn:
            bulk_insert(conn, "episodes", rows)
            bulk_insert(conn, "memory_entries", entries)
        bulk_s = time.perf_counter() - t0
        same = ledger.bandit_state(AGENT) == loop.bandit_state
    return {
        "episodes": episodes,
        "batch": size,
        "backend": backend,
        "seconds": round(ledger_s, 3),
        "us_per_episode": round(ledger_s / episodes * 1e6, 1),
        "arms_at_end": len(loop.policies),
        "policies_evolved": sum(len(r.events) for r in reports),
        "windows_distilled": sum(len(r.distilled) for r in reports),
        "posterior_equals_loop": same,
        "bulk_rows_s": round(bulk_s, 3),
        "in_process_loop_s": round(loop_s, 3),
    }
